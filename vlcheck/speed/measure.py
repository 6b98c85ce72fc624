"""One family-config's preprocessing, timed in the running Python with the installed vLLM: what a
request costs before it reaches the model, which does not depend on the weights (the synthetic
checkpoints carry the real processor configs), so any machine measures it truly.

- `processor`: vLLM's multimodal processor on the example's prompt with one item of the primary
  modality, processor cache off (the HF processor, prompt updates, placeholder search).
- `processor_cached`: the same request again through a processor with the engine's default cache:
  a hit (hashing the item, reading the cache).
- `video_decode`: where the family takes video, vLLM's own loader for the checkpoint decoding an
  mp4 of the example's frames.
- `chat_render`: vLLM's chat renderer in this process on the example's chat request (the
  messages parsed, the image decoded from its data URL, the chat template, the prompt tokenized):
  the part of a served request before the processor, without a server's noise.
- `render` (with `served`): the family-config's render server (`vllm launch render` on its launch
  line, started once per worker) answering the example's chat request over HTTP: parsing the messages (the image
  as a data URL decoded), the chat template, the processor; what a client waits for before an engine.

Each is a list of per-call seconds after one untimed call (imports, lazy initialisation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from vlcheck import adapter
from vlcheck.spec.schema import FamilySpec, Variant

METRICS = ("processor", "processor_cached", "video_decode", "chat_render", "render")


class NotMeasurable(Exception):
    """This family-config cannot be timed here: the message says why (a skip, never a pass)."""


def seconds(call: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


@dataclass
class Prepared:
    """What a round reuses: built once per process, so a round times the requests alone."""

    calls: dict[str, Callable[[], object]] = field(default_factory=dict)
    not_timed: dict[str, str] = field(default_factory=dict)
    """Metrics this family-config has but that cannot be timed here, with why."""


def prepare(spec: FamilySpec, variant: Variant, served: bool = False) -> Prepared:
    """`served`: also start the family-config's render server and time its round trip (`render`),
    a few seconds a worker per family-config (`speed ab --served`)."""
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.prompt.render import default_questions
    from vlcheck.prompt.requests import example_prompt, media_data
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        local = str(model_files(spec, variant))
    except Exception as err:  # noqa: BLE001 - no checkpoint: nothing to time, said as a skip
        raise NotMeasurable(f"no checkpoint: {err}") from err
    modality = variant.primary_modality
    args = variant.engine_args_for(modality, 1)
    try:
        prompt = example_prompt(spec, variant, modality, default_questions(variant, modality)[0], 1)
    except TemplateUnavailable as err:
        raise NotMeasurable(f"the example renders with the model's chat template: {err}") from err
    data = {modality: media_data(variant, modality, 1)}
    prepared = Prepared()
    for name, cached in (("processor", False), ("processor_cached", True)):
        try:
            processor = adapter.create_processor(local, args, cached=cached)
            adapter.apply_processor(processor, prompt, data)  # untimed: lazy set-up, and the cache's fill
        except Exception as err:  # noqa: BLE001 - a processor that fails has no speed: the processor check says why
            raise NotMeasurable(f"vLLM's processor fails on the example ({type(err).__name__}: {str(err)[:200]})") from err
        prepared.calls[name] = (lambda p=processor: adapter.apply_processor(p, prompt, data))
    if "video" in variant.modalities:
        try:
            prepared.calls["video_decode"] = _video_decode(variant, local)
        except Exception as err:  # noqa: BLE001 - no mp4 writer or loader here: said, and the processor timings stand
            prepared.not_timed["video_decode"] = f"{type(err).__name__}: {str(err)[:200]}"
    try:
        prepared.calls["chat_render"] = _chat_render(variant, local, args, modality)
    except Exception as err:  # noqa: BLE001 - vLLM's renderer refuses it: said, the other timings stand
        prepared.not_timed["chat_render"] = f"{type(err).__name__}: {str(err)[:200]}"
    if not served:
        return prepared
    try:
        prepared.calls["render"] = _render(spec, variant, modality)
    except Exception as err:  # noqa: BLE001 - a server that does not serve it: said, the other timings stand
        prepared.not_timed["render"] = f"{type(err).__name__}: {str(err)[:200]}"
    return prepared


def _chat_render(variant: Variant, local: str, args: dict, modality: str) -> Callable[[], object]:
    """The chat request through vLLM's renderer, with the chat template its render server gets."""
    from vlcheck.adapter.chat_renderer import create_chat_renderer, render_chat
    from vlcheck.prompt.render import default_questions
    from vlcheck.served.render import served_chat_template
    from vlcheck.served.requests import chat_messages

    renderer = create_chat_renderer(local, args)
    template = served_chat_template(variant, local)
    messages = chat_messages(variant, modality, default_questions(variant, modality)[0], 1)
    render_chat(renderer, messages, template)  # untimed, as the processor's first call
    return lambda: render_chat(renderer, messages, template)


def _render(spec: FamilySpec, variant: Variant, modality: str) -> Callable[[], object]:
    """The chat request's round trip through the family-config's own render server; the server
    lives as long as this worker (its fork server stops it when the worker exits)."""
    from vlcheck.prompt.render import default_questions
    from vlcheck.served import render as served_render
    from vlcheck.served.client import Client
    from vlcheck.served.requests import chat_messages

    server, _ = served_render.start(spec, variant)
    server.wait_ready()
    client = Client(server.url)
    messages = chat_messages(variant, modality, default_questions(variant, modality)[0], 1)

    def call():
        reply = client.render_chat(messages)
        if not reply.ok:  # a timing of an error page is no timing of rendering
            raise NotMeasurable(f"the render server answered {reply.status}: {reply.message[:200]}")
        return reply

    call()  # untimed, as the processor's first call
    return call


def _video_decode(variant: Variant, local: str) -> Callable[[], object]:
    from vlcheck.adapter import video as video_adapter
    from vlcheck.core import media
    from vlcheck.core.video_files import write_mp4

    frames = media.items("video", 1, variant.modalities["video"].video_metadata)[0]
    data = write_mp4(frames[0] if isinstance(frames, tuple) else frames)
    video_adapter.decode(local, data)  # untimed, as the processor's first call
    return lambda: video_adapter.decode(local, data)


def measure(prepared: Prepared, repeats: int) -> dict[str, list[float]]:
    return {name: seconds(call, repeats) for name, call in prepared.calls.items()}
