"""The `video_file` configuration's render path, no engine: the example's video sent to
`vllm launch render` as an mp4 file (`video_url` with a `data:video/mp4` URL), its rendered
token ids and placeholder ranges equal to vLLM's processor on the frames vlcheck decodes from the
same file itself (OpenCV, frame by frame) and samples by the server's loader rules, with that
loader's metadata (`vlcheck/core/video_files.py`). Measured on vLLM 0.24.0 (CUDA wheel on CPU),
opencv-python-headless 5.0.0: both families take all 8 frames of the 2 fps file; qwen2_vl renders
49 tokens (16 video placeholders), as offline. qwen3_vl is rejected (500 "timestamps and tokens_per_frame
must have the same length"), and so are the same frames offline: its loader kept every frame, so the
metadata says do_sample_frames=True; transformers then samples at the engine's mm_processor_kwargs fps
(1, the example's: 4 frames, 2 temporal patches) while vLLM computes the timestamps at the video
processor's default fps (2: 4 timestamps) because the engine-level kwargs are not in the `mm_kwargs`
its `_call_hf_processor` reads. The engine side (greedy answers) is `vlcheck/configurations/video_file.py`."""

import pytest

from vlcheck.adapter.video import video_loader
from vlcheck.core import video_files
from vlcheck.runners.pytest_plugin import selected_families
from vlcheck.prompt.render import default_questions
from vlcheck.spec.registry import all_families

FAMILIES = ("qwen2_vl", "qwen3_vl")
"""One loader each (vLLM's `qwen2_vl` and `qwen3_vl` samplers); qwen3_vl's processor also reads
the loader's metadata (fps, frame indices: the timestamps in its prompt)."""


def _family_config(name: str, config):
    if name not in selected_families(config):
        pytest.skip(f"{name} is not selected")
    spec = all_families().get(name)
    if spec is None:
        pytest.skip(f"{name}: its spec does not load")
    variant = next((v for v in spec.variants if "video" in v.modalities), None)
    if variant is None:
        pytest.skip(f"{name}: no example sends videos")
    return spec, variant


def _offline(spec, variant, model_dir: str, clip: video_files.VideoFile) -> dict:
    """vLLM's processor on the example's prompt with the independently decoded frames."""
    from vlcheck import adapter
    from vlcheck.prompt.requests import example_prompt

    processor = adapter.create_processor(model_dir, variant.engine_args_for("video", 1), cached=True)
    prompt = example_prompt(spec, variant, "video", default_questions(variant, "video")[0])
    return adapter.apply_processor(processor, prompt, {"video": clip.item()})


@pytest.mark.parametrize("name", FAMILIES)
def test_mp4_video_url_renders_the_decoded_frames(name, pytestconfig):
    from vlcheck.prompt.requests import media_data
    from vlcheck.served import render
    from vlcheck.served.client import Client
    from vlcheck.served.requests import chat_messages

    spec, variant = _family_config(name, pytestconfig)
    try:
        server, line = render.start(spec, variant)
    except render.NotServable as err:
        pytest.skip(f"{name} [{variant.kind}]: {err}")
    try:
        example = media_data(variant, "video", 1)
        video_kwargs = (variant.engine_args_for("video", 1).get("media_io_kwargs") or {}).get("video", {})
        try:
            clip = video_files.video_file(example[0] if isinstance(example, tuple) else example, video_loader(line.model_dir),
                                          video_kwargs)
        except (video_files.VideoFileUnavailable, video_files.LoaderNotModelled) as err:
            pytest.skip(f"{name} [{variant.kind}]: {err}")
        server.wait_ready()
        messages = chat_messages(variant, "video", default_questions(variant, "video")[0], 1, urls=[clip.url])
        reply = Client(server.url).render_chat(messages)
    finally:
        server.stop(graceful=False)
    frames = f"{len(clip.indices)} of {clip.decoded.frame_count} frames, loader {clip.loader}"
    try:
        offline = _offline(spec, variant, line.model_dir, clip)
    except Exception as err:  # noqa: BLE001 - vLLM's processor on the loader's own output: compared below
        rejected_too(name, variant, reply, err, frames)
        raise
    assert reply.ok, f"{name} [{variant.kind}]: the render server rejected the mp4 ({reply.status}): {reply.message}"
    served = render.rendered(None, "video x1", reply, with_text=False)
    assert served.placeholders == {"video": offline["placeholders"]["video"]}, (
        f"{name} [{variant.kind}]: the served video placeholders {served.placeholders} differ from the offline "
        f"processor's {offline['placeholders']} on the decoded frames ({frames})")
    assert served.token_ids == offline["prompt_token_ids"], (
        f"{name} [{variant.kind}]: the served prompt ({len(served.token_ids)} tokens) differs from the offline "
        f"processor's ({len(offline['prompt_token_ids'])}) on the decoded frames ({frames})")


def rejected_too(name, variant, reply, err, frames: str) -> None:
    """vLLM's processor rejects the frames and metadata its own loader makes of the file: where the
    server answers with the same message, the file path is faithful and the rejection is the
    processor's (an expected failure that names it); otherwise the caller re-raises."""
    message = str(err).splitlines()[0] if str(err) else type(err).__name__
    if not reply.ok and message in reply.message:
        pytest.xfail(f"{name} [{variant.kind}]: vLLM rejects an mp4 video_url ({reply.status}: {reply.message}) "
                     f"and its processor the same decoded frames with the loader's metadata ({frames}): "
                     f"{type(err).__name__}: {message}")
