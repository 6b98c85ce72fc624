"""One family-config served by `vllm launch render` on CPU: every request of the example sent as
an OpenAI chat completion, recorded with what the offline path (vLLM's processor on the example's
own prompt) gives for the same request.

The record holds, per request shape (`image x1`, `image x2`, `video x1`): the served token ids,
placeholder ranges and item hashes, the prompt text (`/detokenize`), `/tokenize`'s token ids
for the same messages, the uuid round trip, and the offline token ids and ranges; for the server:
its launch line, start time, chat template source and the content format vLLM detected. The
checks in `vlcheck.served.checks` judge it; the bad-request table (`bad_requests.py`) is sent to
the same server.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from vlcheck.core.textdiff import without_today
from vlcheck.prompt.render import default_questions
from vlcheck.served.client import Client, Reply, placeholder_ranges
from vlcheck.served.launch import LaunchLine, launch_line
from vlcheck.served.requests import chat_messages
from vlcheck.served.server import RenderForkServer, Server, ServerFailed, free_port
from vlcheck.spec.schema import FamilySpec, Variant, config_id

RANGE_MARK = "⟦{modality} {index}: {length} tokens⟧"
CONTENT_FORMAT = re.compile(r"Detected the chat template content format to be '(\w+)'")


class NotServable(LookupError):
    """The family-config cannot be served here (no checkpoint, no chat template offline): a skip."""


@dataclass
class Rendered:
    """One chat request rendered by the server."""

    shape: str
    reply_status: int | None
    message: str = ""
    token_ids: list[int] = field(default_factory=list)
    placeholders: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    hashes: dict[str, list[str]] = field(default_factory=dict)
    text: str = ""
    """The prompt as text, each placeholder range shown as RANGE_MARK."""

    @property
    def ok(self) -> bool:
        return self.reply_status == 200


@dataclass
class Offline:
    shape: str
    token_ids: list[int] = field(default_factory=list)
    placeholders: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    error: str = ""
    text: str = ""
    unavailable: bool = False
    """The example's prompt could not be made here (its chat template is not cached): `error`
    says why; vLLM's processor was not asked."""


@dataclass
class UuidRoundTrip:
    hashes: dict[str, list[str]]
    """The item hashes of the request sent with uuids."""

    uuids: list[str]
    same_tokens_as_plain: bool
    empty_known: Reply
    """The same request, its parts empty, the same uuids."""

    empty_known_same_tokens: bool
    empty_unknown: Reply
    empty_known_hashes: dict[str, list[str]] = field(default_factory=dict)
    """The item hashes of the empty parts sent with the same uuids: what a uuid alone names."""


@dataclass
class ServedRecord:
    family: str
    kind: str
    line: LaunchLine
    start_s: float
    content_format: str | None
    renders: dict[str, Rendered] = field(default_factory=dict)
    offline: dict[str, Offline] = field(default_factory=dict)
    tokenized: dict[str, Reply] = field(default_factory=dict)
    uuid: UuidRoundTrip | None = None
    bad_requests: list[Any] = field(default_factory=list)
    network_faults: list[Any] = field(default_factory=list)
    """The media faults of `network_faults.py`, per image and video modality."""

    containers: list[Any] = field(default_factory=list)
    """The video container files of `containers.py` (families that take video)."""

    server_cpu_s: float | None = None
    """CPU seconds the server used, start to stop (the cost the time budget counts)."""


@lru_cache(maxsize=1)
def fork_server() -> RenderForkServer:
    server = RenderForkServer.for_this_process()
    if server.owner:
        atexit.register(server.close)
    return server


def shapes(variant: Variant) -> list[tuple[str, int]]:
    """(modality, item count) of the requests sent: one item of each modality, and the
    multi-image example's full count."""
    top = variant.most_items
    return [(m, c) for m in variant.modalities for c in sorted({1, top})]


def shape_name(modality: str, count: int) -> str:
    return f"{modality} x{count}"


def chat_template_for(variant: Variant, workdir: Path, checkpoint: str | None = None) -> tuple[Path | None, str]:
    """The `--chat-template` file to pass (None where vLLM's own fallback serves the model) and
    the template's source. Where the model's files are not in the HF cache, vLLM's fallback for
    the checkpoint's model_type stands in (what vLLM serves a model without a template with).
    Raises NotServable when neither exists."""
    from vlcheck import adapter
    from vlcheck.prompt.templates import TemplateUnavailable, resolve

    try:
        template = resolve(variant)
    except TemplateUnavailable as err:
        model_type = _model_type(checkpoint)
        fallback = adapter.chat_template_fallback(model_type, variant.model) if model_type else None
        if fallback is None:
            raise NotServable(f"no chat template to serve {variant.model} with: {err}") from None
        return None, (f"vllm fallback {fallback.name} for model_type {model_type} "
                      f"({variant.model}'s own files are not in the HF cache)")
    if template.source.startswith("vllm fallback"):
        return None, template.source
    path = workdir / "chat_template.jinja"
    path.write_text(template.text)
    return path, f"--chat-template from {variant.model}'s {template.source}"


def served_chat_template(variant: Variant, checkpoint: str) -> str | None:
    """The chat template the served engine checks serve `variant` with: the model's (its text), or
    None where vLLM's fallback for the checkpoint serves it (its files are not in the HF cache).
    Raises NotServable when neither exists."""
    from vlcheck.prompt.templates import TemplateUnavailable, resolve

    try:
        return resolve(variant).text
    except TemplateUnavailable:
        chat_template_for(variant, Path(tempfile.mkdtemp(prefix="vlcheck-engine-server-")), checkpoint)
        return None


def _model_type(checkpoint: str | None) -> str | None:
    import json

    try:
        return json.loads((Path(checkpoint) / "config.json").read_text()).get("model_type") if checkpoint else None
    except (OSError, ValueError):
        return None


def spec_launch_line(spec: FamilySpec, variant: Variant, workdir: Path) -> LaunchLine:
    """The family-config's own launch line on its synthetic checkpoint. Raises NotServable."""
    from vlcheck import adapter
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.checkpoints.synthetic import NotBuildable

    try:
        local = str(model_files(spec, variant))
    except NotBuildable as err:
        raise NotServable(f"no checkpoint: {err}") from None
    template, source = chat_template_for(variant, workdir, local)
    return launch_line(variant, local, set(adapter.engine_arg_types()), template, source)


NO_FETCH_RETRIES = {"VLLM_MEDIA_FETCH_MAX_RETRIES": "0"}
"""The family-configs' render servers fetch an http media URL once: vLLM's media connector, not
the family's processor, answers an unreachable URL (500 on every family-config of 0.24.0 and
0.32.0), and its default 3 retries (1 s + 4 s of backoff) would add 5 s of waiting to each
family-config's bad-request table. One server-wide test keeps vLLM's own retries
(tests/served/test_served_media_fetch.py). A user's own VLLM_MEDIA_FETCH_MAX_RETRIES is kept."""


def start(spec: FamilySpec, variant: Variant, line: LaunchLine | None = None,
          env: dict[str, str] | None = None) -> tuple[Server, LaunchLine]:
    """A render server for the family-config (not yet ready), on its own launch line or the given
    one (a user's `vllm serve` line). Raises NotServable. `env`: added to the server's environment
    (default: NO_FETCH_RETRIES, unless the variable is set here)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"vlcheck-served-{config_id(spec, variant)}-"))
    line = line or spec_launch_line(spec, variant, workdir)
    port = free_port()
    argv = [line.model_dir, *line.flags, "--host", "127.0.0.1", "--port", str(port)]
    if env is None:
        env = {k: v for k, v in NO_FETCH_RETRIES.items() if k not in os.environ}
    return fork_server().start(argv, port, workdir / "server.log", env), line


def range_text(client: Client, token_ids: list[int], placeholders: dict[str, list[tuple[int, int]]]) -> str:
    """The prompt decoded by the server, each placeholder range replaced by RANGE_MARK."""
    marks = sorted((offset, length, modality, i) for modality, ranges in placeholders.items()
                   for i, (offset, length) in enumerate(ranges))
    pieces, at = [], 0
    for offset, length, modality, i in marks:
        pieces.append(token_ids[at:offset])
        pieces.append(RANGE_MARK.format(modality=modality, index=i, length=length))
        at = offset + length
    pieces.append(token_ids[at:])
    out = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        elif piece:
            reply = client.detokenize(piece)
            out.append(reply.body["prompt"] if reply.ok else f"<detokenize {reply.status}: {reply.message[:80]}>")
    return without_today("".join(out))




def rendered(client: Client, shape: str, reply: Reply, with_text: bool = True) -> Rendered:
    if not reply.ok:
        return Rendered(shape, reply.status, reply.message)
    body = reply.body
    features = body.get("features") or {}
    out = Rendered(shape, reply.status, token_ids=list(body.get("token_ids") or []), placeholders=placeholder_ranges(features),
                   hashes={m: list(h) for m, h in (features.get("mm_hashes") or {}).items()})
    if with_text:
        out.text = range_text(client, out.token_ids, out.placeholders)
    return out


def offline(spec: FamilySpec, variant: Variant, modality: str, count: int, client: Client,
            model_dir: str | None = None, engine_args: dict | None = None) -> Offline:
    """vLLM's processor on the example's own prompt (what the offline example sends to `LLM.generate`),
    with the processor cache an engine has by default; on the spec's engine args and model files, or
    on `model_dir` with `engine_args` (a user's launch line: what its flags configure)."""
    from vlcheck import adapter
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.prompt.requests import example_prompt, media_data
    from vlcheck.prompt.templates import TemplateUnavailable

    shape = shape_name(modality, count)
    try:
        prompt = example_prompt(spec, variant, modality, default_questions(variant, modality, count)[0], count)
        processor = _offline_processor(model_dir or str(model_files(spec, variant)), variant, modality, engine_args)
        out = adapter.apply_processor(processor, prompt, {modality: media_data(variant, modality, count)})
    except TemplateUnavailable as err:
        return Offline(shape, error=f"the example's prompt needs its chat template: {err}", unavailable=True)
    except Exception as err:  # vLLM's processor rejected the example's own prompt: the processor check says so
        return Offline(shape, error=f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
    result = Offline(shape, out["prompt_token_ids"], out["placeholders"])
    result.text = range_text(client, result.token_ids, result.placeholders)
    return result


_processors = threading.local()


def _offline_processor(local: str, variant: Variant, modality: str, args: dict | None = None):
    import json

    from vlcheck import adapter

    args = args if args is not None else variant.engine_args_for(modality, variant.most_items)
    # the two variants of a family may share a checkpoint but not their mm_processor_kwargs
    key = (local, json.dumps(args, sort_keys=True, default=str))
    if getattr(_processors, "key", None) != key:  # one per thread: processors hold tokenizers and HF processors
        _processors.key = None
        _processors.value = adapter.create_processor(local, args, cached=True)
        _processors.key = key
    return _processors.value


def uuid_round_trip(client: Client, spec: FamilySpec, variant: Variant, plain: Rendered) -> UuidRoundTrip:
    modality, count = shapes(variant)[0]
    question = default_questions(variant, modality)[0]
    uuids = [f"{config_id(spec, variant)}-{modality}-{i}" for i in range(count)]
    with_uuids = rendered(client, plain.shape, client.render_chat(chat_messages(variant, modality, question, count, uuids)),
                          with_text=False)
    empty = client.render_chat(chat_messages(variant, modality, question, count, uuids, urls=[None] * count))
    unknown = client.render_chat(chat_messages(variant, modality, question, count, ["never-sent-uuid"] * count,
                                               urls=[None] * count))
    empty_tokens = list((empty.body or {}).get("token_ids") or []) if empty.ok else []
    empty_hashes = rendered(client, plain.shape, empty, with_text=False).hashes if empty.ok else {}
    return UuidRoundTrip(with_uuids.hashes, uuids, with_uuids.token_ids == plain.token_ids, empty,
                         empty_tokens == plain.token_ids, unknown, empty_hashes)


def content_format(server: Server) -> str | None:
    found = CONTENT_FORMAT.findall(server.log_text())
    return found[-1] if found else None


def serve(spec: FamilySpec, variant: Variant, with_bad_requests: bool = True, line: LaunchLine | None = None,
          offline_args: dict | None = None) -> ServedRecord:
    """Start the family-config's server, send everything, stop it. Raises NotServable (skip) and
    ServerFailed (the server did not come up: vLLM's or the launch line's). `line`: a user's
    launch line instead of the spec's; its flags change what the offline path gets, so the offline
    side then runs on the line's model files with `offline_args` (the engine args the line resolves to)."""
    server, line = start(spec, variant, line)
    try:
        server.wait_ready()
        client = Client(server.url)  # the served model name: whatever the launch line made it
        record = ServedRecord(spec.name, variant.kind, line, server.ready_after_s or 0.0, None)
        for modality, count in shapes(variant):
            shape = shape_name(modality, count)
            messages = chat_messages(variant, modality, default_questions(variant, modality, count)[0], count)
            record.renders[shape] = rendered(client, shape, client.render_chat(messages))
            record.tokenized[shape] = client.tokenize_chat(messages)
            record.offline[shape] = (offline(spec, variant, modality, count, client, line.model_dir, offline_args)
                                     if offline_args is not None else offline(spec, variant, modality, count, client))
        first = record.renders[shape_name(*shapes(variant)[0])]
        if first.ok:
            record.uuid = uuid_round_trip(client, spec, variant, first)
        record.content_format = content_format(server)
        if with_bad_requests:
            from vlcheck.served.bad_requests import run_cases

            record.bad_requests = run_cases(client, spec, variant, first, line.limits())
            from vlcheck.served.network_faults import run_faults, sender

            record.network_faults = run_faults(sender(client, variant), variant)
        if "video" in variant.modalities:
            record.containers = served_containers(client, spec, variant, line.model_dir, offline_args)
        record.server_cpu_s = server.cpu_seconds()
    finally:
        server.stop(graceful=False)  # answers, log and content format are read: nothing left to shut down
    shutil.rmtree(server.log.parent, ignore_errors=True)  # kept only where the server failed: its log says why
    return record


def served_containers(client: Client, spec: FamilySpec, variant: Variant, model_dir: str,
                      engine_args: dict | None) -> list[Any]:
    """`containers.py` on this server, against vLLM's processor offline on the same model files."""
    from vlcheck.core.versions import installed
    from vlcheck.prompt.requests import example_prompt
    from vlcheck.prompt.templates import TemplateUnavailable
    from vlcheck.served.containers import offline_lengths_for, run_containers
    from vlcheck.served.network_faults import sender

    args = engine_args if engine_args is not None else variant.engine_args_for("video", 1)
    video_kwargs = dict((args.get("media_io_kwargs") or {}).get("video") or {})
    why_not = ""
    try:
        prompt = example_prompt(spec, variant, "video", default_questions(variant, "video")[0], 1)
        lengths = offline_lengths_for(_offline_processor(model_dir, variant, "video", engine_args), prompt, model_dir,
                                      video_kwargs)
    except TemplateUnavailable as err:
        why_not = f"the example's prompt needs its chat template: {err}"
    except Exception as err:  # noqa: BLE001 - the processor check reports vLLM refusing to build it
        why_not = f"no offline processor: {type(err).__name__}: {str(err)[:160]}"
    if why_not:
        lengths = lambda data: why_not  # noqa: E731 - the served renders are still held to each other
    return run_containers(sender(client, variant), lengths, video_kwargs.get("backend", "opencv"), installed().get("vllm"))


_records: dict[str, Future] = {}
_records_lock = threading.Lock()
SIDE_BY_SIDE = 2
"""Servers served ahead at once by `serve_ahead` (each is a process; two fill this 2-core machine)."""


def _serve_or_why(spec: FamilySpec, variant: Variant) -> ServedRecord | NotServable | ServerFailed:
    try:
        return serve(spec, variant)
    except (NotServable, ServerFailed) as err:
        return err


def _future(spec: FamilySpec, variant: Variant, pool: ThreadPoolExecutor | None) -> Future:
    key = config_id(spec, variant) + "@" + spec.path
    with _records_lock:
        future = _records.get(key)
        first = future is None
        if first:
            future = pool.submit(_serve_or_why, spec, variant) if pool is not None else Future()
            _records[key] = future
    if first and pool is None:  # served here, in this thread; others asking meanwhile wait for it
        future.set_result(_serve_or_why(spec, variant))
    return future


def served_record(spec: FamilySpec, variant: Variant) -> ServedRecord | NotServable | ServerFailed:
    """`serve`, once per process for a family-config: every served test and check reads this
    (a record being served ahead by `serve_ahead` is waited for)."""
    return _future(spec, variant, None).result()


def serve_ahead(families) -> ThreadPoolExecutor:
    """Serve every family-config of `families` in the background, SIDE_BY_SIDE servers at a time,
    so that `served_record` finds them ready (`vlcheck check`)."""
    from vlcheck.adapter.hf_classes import import_auto_tables

    import_auto_tables()
    pool = ThreadPoolExecutor(max_workers=SIDE_BY_SIDE, thread_name_prefix="vlcheck-served")
    for spec in families:
        for variant in spec.variants:
            _future(spec, variant, pool)
    atexit.register(pool.shutdown, cancel_futures=True)
    return pool
