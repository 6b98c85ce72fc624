"""`vlcheck check --launch-line "vllm serve MODEL --flag ..."`: a user's own launch line, checked.

The line is parsed by the installed vLLM's parser: a flag it no longer accepts fails the `launch`
cell naming the flag and how to migrate (`spec/migrations.py`). A line that parses has its
resolved configuration recorded as facts (so `vlcheck diff` shows a default that moved), and is
served by `vllm launch render` with the user's flags on MODEL's own small files where the HF
cache has them (a render server needs no weights), else on the synthetic checkpoint of its
architecture's family, and sent that family's example requests (the `served` cell; not compared
with the offline path, whose engine args are the example's, not the user's).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from vlcheck.core.results import CheckResult, Status, frames_of
from vlcheck.spec.schema import FamilySpec, Variant

CHECKS = ("launch", "served")


@dataclass
class ResolvedModel:
    path: str
    kind: str
    """`local folder`, `HF cache` or `synthetic <family> checkpoint`."""

    family: FamilySpec | None
    variant: Variant | None


def row_name(line: str) -> str:
    """The report row of a launch line: its model and a short hash of the whole line (stable
    across runs, so both sides of a diff meet)."""
    from vlcheck.adapter.serve_args import ServeLineRejected, split

    try:
        model = split(line)[0]
    except (ServeLineRejected, ValueError):
        model = "?"
    return f"serve {model} #{hashlib.sha256(' '.join(line.split()).encode()).hexdigest()[:6]}"


def read_lines(lines: list[str], files: list[str]) -> list[str]:
    out = list(lines)
    for name in files:
        for text in Path(name).read_text().splitlines():
            if text.strip() and not text.lstrip().startswith("#"):
                out.append(text.strip())
    return out


def _architecture(folder: Path) -> str | None:
    try:
        return (json.loads((folder / "config.json").read_text()).get("architectures") or [None])[0]
    except (OSError, ValueError):
        return None


def family_of(model: str, architecture: str | None) -> tuple[FamilySpec | None, Variant | None]:
    """The family whose example serves this model id, else one whose architecture it has."""
    from vlcheck.spec.registry import all_families

    families = all_families().values()
    for match in (lambda v: v.model == model, lambda v: architecture is not None and v.architecture == architecture):
        for spec in families:
            for variant in spec.variants:
                if match(variant):
                    return spec, variant
    return None, None


def resolve_model(model: str) -> ResolvedModel:
    """MODEL's own small files (a local folder, or the HF cache's snapshot with config and
    tokenizer), else the synthetic checkpoint of its family. Raises LookupError if neither."""
    from vlcheck.checkpoints.synthetic import checkpoint_dir

    if os.path.isdir(model):
        spec, variant = family_of(model, _architecture(Path(model)))
        return ResolvedModel(model, "local folder", spec, variant)
    snapshot = _cached_snapshot(model)
    spec, variant = family_of(model, _architecture(snapshot) if snapshot else None)
    if snapshot is not None and any((snapshot / f).exists() for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return ResolvedModel(str(snapshot), "HF cache", spec, variant)
    if spec is None:
        raise LookupError(f"{model}: not in the HF cache with its tokenizer, and no family spec serves it "
                          "(add one: vlcheck/families/<family>.toml)")
    return ResolvedModel(str(checkpoint_dir(spec, variant)), f"synthetic {spec.name} checkpoint", spec, variant)


def _cached_snapshot(model: str) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except Exception:  # noqa: BLE001  (not cached, or not a Hub id: the synthetic checkpoint stands in)
        return None


def check_line(line: str) -> list[CheckResult]:
    """The `launch` and `served` cells of one launch line."""
    from vlcheck import adapter
    from vlcheck.adapter.serve_args import ServeLineRejected, parse, resolved_facts, split
    from vlcheck.spec.migrations import serve_flag_hint

    row = row_name(line)
    version = adapter.version()
    try:
        model, flags = split(line)
        parsed = parse(model, flags)
    except ServeLineRejected as err:
        hint = serve_flag_hint(err.flag) if err.flag else None
        reason = (f"vllm {version} rejects {err.flag or 'the line'}: {err}"
                  + (f"; write instead: {hint}" if hint else ""))
        return [CheckResult(row, "launch", Status.FAIL, reason, [line, reason], {"launch.line": line, "launch.rejected": err.flag or str(err)}),
                CheckResult(row, "served", Status.SKIP, "the launch line does not parse")]
    try:
        resolved = resolve_model(model)
    except LookupError as err:
        return [CheckResult(row, "launch", Status.SKIP, f"parsed by vllm {version}; {err}", data={"launch.line": line}),
                CheckResult(row, "served", Status.SKIP, str(err))]
    try:
        facts = resolved_facts(parse(model, flags), resolved.path)
    except Exception as err:  # vLLM refused the configuration (a value out of range, a model it cannot serve)
        reason = f"parsed by vllm {version}, but its configuration does not resolve: {type(err).__name__}: {str(err)[:300]}"
        return [CheckResult(row, "launch", Status.FAIL, reason, [line, reason], {"launch.line": line},
                            frames=frames_of(err)),
                CheckResult(row, "served", Status.SKIP, "the configuration does not resolve")]
    data = {"launch.line": line, "launch.model_files": resolved.kind, **{f"launch.{k}": v for k, v in facts.items()}}
    launch = CheckResult(row, "launch", Status.PASS, f"parsed by vllm {version}; model files: {resolved.kind}", data=data)
    return [launch, served_cell(row, line, model, flags, resolved, offline_engine_args(facts))]


OFFLINE_FACTS = ("max_model_len", "limit_mm_per_prompt", "mm_processor_kwargs")
"""The resolved facts of a launch line that shape vLLM's processor: the offline side of its served
comparison runs with them, so a difference is the serving path's, not the flags'."""


def offline_engine_args(facts: dict) -> dict:
    """The facts as engine args again: a resolved limit reads {"count": 1, "width": None, ...}, which
    vLLM's ModelConfig refuses (None is not a size)."""
    args = {k: facts[k] for k in OFFLINE_FACTS if facts.get(k) is not None}
    if isinstance(args.get("limit_mm_per_prompt"), dict):
        limits = {}
        for modality, limit in args["limit_mm_per_prompt"].items():
            if isinstance(limit, dict):
                limit = {k: v for k, v in limit.items() if v is not None}
                limit = limit.get("count", 1) if set(limit) <= {"count"} else limit
            limits[modality] = limit
        args["limit_mm_per_prompt"] = limits
    return args


def served_cell(row: str, line: str, model: str, flags: list[str], resolved: ResolvedModel,
                offline_args: dict | None = None) -> CheckResult:
    from vlcheck.core.results import declared_deviation
    from vlcheck.served.checks import contract_problems, facts, offline_differences
    from vlcheck.served.launch import LaunchLine
    from vlcheck.served.render import NotServable, serve
    from vlcheck.served.server import ServerFailed

    if resolved.family is None:
        return CheckResult(row, "served", Status.SKIP, f"{model}: no family spec to take its example requests from")
    spec, variant = resolved.family, resolved.variant
    user_line = LaunchLine(resolved.path, model, [f for f in flags], template_source="as the line says")
    try:
        if "--chat-template" not in flags and resolved.kind.startswith("synthetic"):
            from vlcheck.served.render import chat_template_for
            import tempfile

            template, source = chat_template_for(variant, Path(tempfile.mkdtemp(prefix="vlcheck-serve-line-")))
            if template is not None:
                user_line.flags += ["--chat-template", str(template)]
                user_line.template_source = source + " (the synthetic checkpoint has none of its own)"
        record = serve(spec, variant, line=user_line, offline_args=offline_args or {})
    except NotServable as err:
        return CheckResult(row, "served", Status.SKIP, str(err))
    except ServerFailed as err:
        return CheckResult(row, "served", Status.FAIL, f"`vllm launch render` did not start with this line: "
                           f"{str(err).splitlines()[-1][:300]}", [str(err)], frames=err.frames)
    problems = contract_problems(record)
    data = {k.replace(f"{variant.kind}.", "", 1): v for k, v in facts(record).items()}
    data["served_launch"] = line
    if problems:
        return CheckResult(row, "served", Status.FAIL, problems[0], problems, data)
    differences = offline_differences(record)
    if differences:  # what this line serves differs from vLLM's processor on the same files and flags
        result = CheckResult(row, "served", Status.FAIL, f"served vs offline: {' '.join(differences[0].splitlines()[:4])[:400]}",
                             differences, data)
        return declared_deviation(result, variant)
    compared = sum(1 for o in record.offline.values() if not o.error)
    not_compared = [f"{shape}: {o.error[:160]}" for shape, o in record.offline.items() if o.error]
    return CheckResult(row, "served", Status.PASS, f"{spec.name}'s example requests served by this line "
                       f"(server up in {record.start_s:.1f} s); {compared} equal to the offline path with the "
                       "line's flags" + (f", {len(not_compared)} not compared ({not_compared[0]})" if not_compared else ""),
                       details=not_compared, data=data)
