"""`video_loaders`: every video decoding library the installed vLLM ships (its loaders' `backend`:
opencv, pyav, torchcodec) over the container files people upload (`core/video_containers.py`),
through the loader vLLM picks for the family, each answer held to the file's truth:

- which frames: the source frame each returned frame shows (read from its pixels) is the one its
  label (`frames_indices`) names, and the labels are what the loader's documented sampling picks from
  the file's truth (`core/video_files.sampled_indices`; a loader vlcheck does not model is recorded,
  not compared);
- which times: the frame count, fps and duration vLLM passes on are the file's, and every frame's
  time as the processor reads it (label / fps) is within 20 ms of the time the file shows it at;
- the family's processor on the loader's frames and metadata gives the prompt (token ids and
  placeholder ranges) it gives for the truth frames sent as arrays with the truth's metadata.

A codec that cannot run here skips naming its library; a container a codec rejects is a finding.
Findings of a decoder defect declared in `spec/decoder_defects.py` for the installed vLLM make the
cell a declared deviation; any other fails it.
"""

from __future__ import annotations

from typing import Any

from vlcheck import adapter
from vlcheck.adapter import video as video_adapter
from vlcheck.checkpoints.folders import model_files
from vlcheck.checkpoints.synthetic import NotBuildable
from vlcheck.core import video_containers, video_files
from vlcheck.core.results import CheckResult, Status, crashed, raised_by
from vlcheck.core.versions import installed
from vlcheck.prompt.render import default_questions
from vlcheck.prompt.requests import example_prompt
from vlcheck.prompt.templates import TemplateUnavailable
from vlcheck.spec.decoder_defects import defect_covering
from vlcheck.spec.schema import FamilySpec, Variant

CHECK = "video_loaders"
TIME_TOLERANCE_S = 0.02
"""Under half the shortest frame of the set (1/24 s): a frame placed nearer another frame's time is wrong."""


def truth_metadata(indices: list[int]) -> dict[str, Any]:
    """What a loader should pass on for these frames of any container of the set."""
    frames, fps = video_containers.FRAMES, float(video_containers.FPS)
    return {"total_num_frames": frames, "fps": fps, "duration": frames / fps, "video_backend": "opencv",
            "frames_indices": list(indices), "do_sample_frames": len(indices) == frames}


def expected_indices(loader: str, video_kwargs: dict[str, Any]) -> list[int] | None:
    """The loader's documented sampling over the set's truth; None where vlcheck does not model it."""
    kwargs = {k: v for k, v in video_kwargs.items() if k not in ("backend", "video_backend")}
    kwargs.setdefault("num_frames", 32)
    truth = video_files.Decoded(None, float(video_containers.FPS), video_containers.FRAMES)
    try:
        return video_files.sampled_indices(loader, truth, kwargs)
    except video_files.LoaderNotModelled:
        return None


def judge(container, frames, metadata: dict[str, Any], expected: list[int] | None) -> tuple[dict[str, Any], list[str], list[str]]:
    """One decode against the file's truth: (its facts, its findings, evidence). Facts and findings
    stay the same from run to run where the decoder's output does not (a broken frame's stale buffer):
    which source frames broken frames showed is evidence only."""
    labels = [int(i) for i in metadata.get("frames_indices", [])]
    shown = [video_containers.frame_index(frame) for frame in frames]
    facts: dict[str, Any] = {"frames": labels, "fps": round(float(metadata.get("fps", 0)), 4),
                             "total_num_frames": int(metadata.get("total_num_frames", 0)),
                             "duration": round(float(metadata.get("duration", 0)), 4),
                             "frames_as_labelled": shown == labels}
    findings, evidence = [], []
    if shown != labels:
        findings.append("its frames do not show the source frames their labels (frames_indices) name")
        evidence.append(f"{len(labels)} frames labelled {labels} show source frames {shown} (None: black or unreadable)")
    if expected is not None and labels != expected:
        findings.append(f"sampled frames {labels}; its documented sampling over the file's truth "
                        f"({video_containers.FRAMES} frames, {video_containers.FPS} fps) picks {expected}")
    truth = truth_metadata(labels)
    for key in ("total_num_frames", "fps", "duration"):
        if abs(facts[key] - truth[key]) > 1e-3:
            findings.append(f"passes on {key} {facts[key]} where the file holds {truth[key]}")
    fps = facts["fps"]
    if shown == labels and labels and fps > 0:
        facts["time_error_s"] = round(max(abs(label / fps - container.pts[label]) for label in labels), 4)
        if facts["time_error_s"] > TIME_TOLERANCE_S:
            findings.append(f"places frames up to {facts['time_error_s']:.3f} s from the time the file shows them at "
                            f"(label / fps {fps} against the file's timestamps)")
    return facts, findings, evidence


def _prompt_of(processor, prompt: str, item) -> dict[str, Any] | str:
    """The processor's prompt for one video item, or its rejection's first line."""
    try:
        out = adapter.apply_processor(processor, prompt, {"video": item})
    except Exception as err:  # noqa: BLE001 - compared between the two inputs; vlcheck's own crash re-raised
        if raised_by(err) == "vlcheck":
            raise
        return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0].split(' on data=')[0][:200]}"
    return {"prompt_tokens": len(out["prompt_token_ids"]), "placeholders": out["placeholders"].get("video", []),
            "token_ids": out["prompt_token_ids"]}


def _summary(prompt: dict[str, Any] | str) -> Any:
    return prompt if isinstance(prompt, str) else {"prompt_tokens": prompt["prompt_tokens"],
                                                  "placeholders": [list(p) for p in prompt["placeholders"]]}


def _first_difference(a, b) -> str:
    if isinstance(a, str) or isinstance(b, str) or _summary(a) != _summary(b):
        return ""
    at = next(i for i, (x, y) in enumerate(zip(a["token_ids"], b["token_ids"])) if x != y)
    return f" (the same counts; token {at} differs: {a['token_ids'][at]} vs {b['token_ids'][at]})"


def video_loaders_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    where = f"[{variant.kind}]"
    if "video" not in variant.modalities:
        return CheckResult(spec.name, CHECK, Status.SKIP, f"{where} the example sends no video")
    try:
        sources = video_containers.containers()
    except video_containers.ContainersUnavailable as err:
        return CheckResult(spec.name, CHECK, Status.SKIP, f"{where} the container files cannot be written: {err}")
    try:
        local = str(model_files(spec, variant))
    except NotBuildable as err:
        return CheckResult(spec.name, CHECK, Status.SKIP, f"{where} no checkpoint: {err}")
    engine_args = variant.engine_args_for("video", 1)
    video_kwargs = dict((engine_args.get("media_io_kwargs") or {}).get("video") or {})
    loader = video_kwargs.get("video_backend") or video_adapter.video_loader(local)
    try:
        processor = adapter.create_processor(local, engine_args, cached=True)
        prompt = example_prompt(spec, variant, "video", default_questions(variant, "video")[0], 1)
    except (ImportError, TemplateUnavailable) as err:
        return CheckResult(spec.name, CHECK, Status.SKIP, f"{where} no processor or prompt for {spec.name}: {err}")
    except Exception as err:  # noqa: BLE001 - the processor check owns vLLM refusing to build it
        if raised_by(err) == "vlcheck":
            return crashed(spec.name, CHECK, err, where)
        return CheckResult(spec.name, CHECK, Status.SKIP,
                           f"{where} vLLM could not build {spec.name}'s processor (the processor check's finding): "
                           f"{type(err).__name__}: {str(err)[:200]}")
    expected = expected_indices(loader, video_kwargs)
    arrays_indices = expected if expected is not None else list(range(0, video_containers.FRAMES, 6))
    arrays = _prompt_of(processor, prompt, (video_containers.truth_frames(sources[0], arrays_indices),
                                            truth_metadata(arrays_indices)))
    vllm_version = installed().get("vllm")
    outcomes: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    declared, problems, evidence = [], [], []
    for codec in video_adapter.codecs():
        why = video_adapter.codec_unavailable(codec)
        if why:
            skipped[codec] = why
            continue
        for container in sources:
            name = f"{codec}/{container.name}"
            head = f"{spec.name} {where} {loader} loader, {codec} codec, {container.name}"
            try:
                frames, metadata = video_adapter.load_video(loader, codec, container.data, video_kwargs)
            except Exception as err:  # noqa: BLE001 - a rejected file is a finding, vlcheck's crash an error
                if raised_by(err) == "vlcheck":
                    return crashed(spec.name, CHECK, err, f"{where} {name}")
                outcomes[name] = {"rejected": f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}"}
                findings = [f"rejected the file: {outcomes[name]['rejected']}"]
            else:
                outcomes[name], findings, shown = judge(container, frames, metadata, expected)
                evidence += [f"{head}: {line}" for line in shown]
                served = _prompt_of(processor, prompt, (frames, metadata))
                outcomes[name]["prompt"] = _summary(served)
                if served != arrays:
                    findings.append(f"the processor's prompt on its frames {_summary(served)} differs from the "
                                    f"same request with the truth frames as arrays {_summary(arrays)}{_first_difference(served, arrays)}")
            for finding in findings:
                defect = defect_covering(codec, container.name, finding, vllm_version)
                (declared if defect else problems).append((f"{head}: {finding}", defect))
    data = {f"{variant.kind}.video_loader": loader, f"{variant.kind}.video_loaders": outcomes,
            f"{variant.kind}.arrays_prompt": _summary(arrays)}
    if expected is None:
        data[f"{variant.kind}.sampling_not_modelled"] = loader
    if skipped:
        data[f"{variant.kind}.codecs_skipped"] = skipped
    lines = [line for line, _ in problems + declared] + evidence
    if problems:
        return CheckResult(spec.name, CHECK, Status.FAIL, problems[0][0], lines, data)
    if declared:
        defects = list(dict.fromkeys(d for _, d in declared))
        return CheckResult(spec.name, CHECK, Status.DEVIATION,
                           f"{where} {loader} loader: known decoder defects (spec/decoder_defects.py): "
                           + ", ".join(f"{d.codec}/{d.container}" for d in defects),
                           lines + [f"{d.codec}/{d.container}: {d.reason}" for d in defects], data, finding=declared[0][0])
    ran = sorted({key.split("/")[0] for key in outcomes})
    return CheckResult(spec.name, CHECK, Status.PASS,
                       f"{where} {loader} loader: {len(outcomes)} decodes ({', '.join(ran)} x {len(sources)} containers) "
                       "match the files' truth and the arrays' prompt", data=data)
