"""Bad requests over HTTP: what a careless or hostile client sends to a served VLM.

Each case is one chat request; its outcome is classified as `rejected <status>: <message>`,
`accepted: <n> tokens` (only cases that `may_accept` may end so), or the failures: a 5xx, no
answer within the time limit, a dropped connection, or a 2xx where the request cannot be served.
After every case the example's valid request is sent again and must render exactly as before (a
bad request must not poison the server's processor cache or state). Only 127.0.0.1 is contacted:
the http URL case points at a closed local port and must fail fast.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from vlcheck.core import media
from vlcheck.prompt.render import default_questions
from vlcheck.served.client import Client, Reply
from vlcheck.served.requests import chat_messages, data_url, media_part, png_data_url
from vlcheck.served.server import free_port
from vlcheck.spec.schema import Declaration, FamilySpec, Variant

CASE_TIMEOUT_S = 120.0
"""An answer slower than this is a hang. Not the time a request should take (a data URL or a refused
local connection takes < 1 s) but the slowest honest answer with room to spare: chameleon's 1 x 4000
image (transformers' ChameleonImageProcessorPil scales the short side to 512 before cropping) took
20-38 s and 11 GB on the 2-core machine, and over 30 s, reported as a hang, on a GPU host running 16
family-configs on 16 cores (2026-11-26)."""


@dataclass(frozen=True)
class BadRequest:
    name: str
    parts: Callable[[Variant, str, int], list[dict[str, Any]] | None]
    """The media parts sent with the example's question (None: the case does not apply)."""

    may_accept: bool = False
    """vLLM may serve it (an odd but valid image): a 200 is an outcome, not a failure."""

    needs_limit: bool = False
    """Applies only where the server has a `limit_mm_per_prompt` for the modality."""

    known_server_error: Declaration | None = None
    """A 5xx measured on these versions for every family (a server-wide bug, not a family's): the
    table shows it as known; outside the versions it fails like any 5xx."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _png_bytes(width: int, height: int) -> bytes:
    """A PNG header declaring this size, with no pixel data (PIL cannot write a 0 x 0 image)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def _image_url(url: Any) -> list[dict[str, Any]]:
    return [{"type": "image_url", "image_url": {"url": url}}]


def _image_only(build: Callable[[], list[dict[str, Any]]]):
    return lambda v, m, limit: build() if "image" in v.modalities else None


def _too_many(v: Variant, m: str, limit: int) -> list[dict[str, Any]]:
    return [media_part(m, data_url(m, i)) for i in media.items(m, limit + 1)]


HTTP_URL_500 = Declaration(
    reason="vLLM answers 500 for a media URL it cannot connect to (aiohttp's 'Cannot connect to host ...' is "
           "not turned into a 4xx); measured with an http URL on a closed 127.0.0.1 port, for every family, on vLLM "
           "0.24.0, 0.32.0 and 0.33.0. By design in 0.33.0: vllm/multimodal/media/connector.py "
           "_wrap_media_fetch_error turns only 4xx answers into 422 and returns 'connection errors' as-is 'to allow "
           "retry logic', which vllm/entrypoints/serve/exception_handling/error_response.py answers as "
           "InternalServerError (500)",
    vllm=">=0.24.0,<=0.33.0", transformers=">=5.16.1,<=5.20.2")


CASES: tuple[BadRequest, ...] = (
    BadRequest("malformed base64", _image_only(lambda: _image_url("data:image/png;base64,@@not*base64@@"))),
    BadRequest("data URL of media type text/plain",
               _image_only(lambda: _image_url("data:text/plain;base64," + _b64(b"hello, not an image")))),
    BadRequest("non-image bytes as image/png", _image_only(lambda: _image_url("data:image/png;base64," + _b64(b"\x00" * 64)))),
    BadRequest("image_url as a bare string",
               _image_only(lambda: [{"type": "image_url", "image_url": png_data_url(media.image(0))}]), may_accept=True),
    BadRequest("image_url without a url", _image_only(lambda: [{"type": "image_url", "image_url": {}}])),
    BadRequest("more items than limit_mm_per_prompt", _too_many, needs_limit=True),
    BadRequest("empty part with an unknown uuid",
               lambda v, m, limit: [media_part(m, None, "vlcheck-never-sent")]),
    BadRequest("zero-size image", _image_only(lambda: _image_url("data:image/png;base64," + _b64(_png_bytes(0, 0))))),
    BadRequest("extreme aspect ratio (1 x 4000)",
               _image_only(lambda: _image_url(png_data_url(media.image(0, (1, 4000))))), may_accept=True),
    BadRequest("video with no frames",
               lambda v, m, limit: [media_part("video", "data:video/jpeg;base64,")] if "video" in v.modalities else None),
    BadRequest("unknown content part type", lambda v, m, limit: [{"type": "vlcheck_unknown", "data": "x"}]),
    BadRequest("http URL, unreachable (closed local port)",
               lambda v, m, limit: _image_url(f"http://127.0.0.1:{free_port()}/image.png") if "image" in v.modalities
               else [media_part("video", f"http://127.0.0.1:{free_port()}/video.mp4")], known_server_error=HTTP_URL_500),
)


@dataclass
class Outcome:
    case: str
    status: int | None
    summary: str
    """What the table shows: `rejected 400: ...`, `accepted: N tokens`, or the failure."""

    failure: str = ""
    """Why this outcome is a failure (empty when it is not)."""

    valid_after: str = "same"
    """The example's valid request right after: `same`, or what changed."""

    @property
    def line(self) -> str:
        after = "" if self.valid_after == "same" else f" | next valid request: {self.valid_after}"
        return f"{self.case}: {self.summary}{after}"


def normalized(message: str) -> str:
    """The server's message without what changes run to run (ports, addresses, object ids)."""
    message = re.sub(r"127\.0\.0\.1(:|', )\d+", r"127.0.0.1\1PORT", message)
    message = re.sub(r"For further information visit https://errors\.pydantic\.dev\S*", "", message)
    message = re.sub(r"0x[0-9a-fA-F]{6,}", "0x…", message)
    message = re.sub(r"chatcmpl-[0-9a-f]+", "chatcmpl-…", message)
    return " ".join(message.split())[:200]


def classify(case: BadRequest, reply: Reply) -> Outcome:
    if reply.status is None:
        return Outcome(case.name, None, f"NO ANSWER: {normalized(reply.message)}", "no answer (a hang or a dropped connection)")
    if reply.status >= 500:
        known = case.known_server_error
        if known is not None and known.applies(*_versions()):
            return Outcome(case.name, reply.status, f"SERVER ERROR {reply.status} (known on {known.scope}): "
                                                    f"{normalized(reply.message)}")
        return Outcome(case.name, reply.status, f"SERVER ERROR {reply.status}: {normalized(reply.message)}",
                       f"answered {reply.status}: a bad request must get a 4xx")
    if 400 <= reply.status < 500:
        text = normalized(reply.message)
        return Outcome(case.name, reply.status, f"rejected {reply.status}: {text}",
                       "" if text else f"rejected {reply.status} without a message")
    tokens = len((reply.body or {}).get("token_ids") or []) if isinstance(reply.body, dict) else 0
    return Outcome(case.name, reply.status, f"accepted: {tokens} tokens",
                   "" if case.may_accept else f"answered {reply.status}: the request cannot be served as sent")


def _versions() -> tuple[str | None, str | None]:
    from vlcheck.core.versions import installed

    versions = installed()
    return versions["vllm"], versions["transformers"]


def limit_of(limits: dict[str, int] | None, modality: str) -> int | None:
    """The server's item limit for a modality (None: the launch line sets none, so the case that
    exceeds it does not apply)."""
    return None if limits is None else limits.get(modality)


Send = Callable[[list, float], Reply]
"""Sends a chat request's messages with a time limit: the render route on CPU, chat completions on a GPU."""


def run_cases(client: Client, spec: FamilySpec, variant: Variant, valid, limits: dict[str, int] | None,
              send: Send | None = None, fingerprint: Callable[[Reply], Any] | None = None,
              cases: Sequence[BadRequest] = CASES) -> list[Outcome]:
    """Every case against a running server. `valid`: the example's request as first rendered
    (`Rendered`); `limits`: the server's `limit_mm_per_prompt`; `send` and `fingerprint` (what must
    not change in the valid request's answer) default to the render route and its token ids."""
    send = send or (lambda messages, timeout_s: client.render_chat(messages, timeout_s=timeout_s))
    fingerprint = fingerprint or (lambda reply: (reply.body or {}).get("token_ids") if isinstance(reply.body, dict) else None)
    modality = variant.primary_modality
    question = default_questions(variant, modality)[0]
    valid_messages = chat_messages(variant, modality, question, int(valid.shape.split("x")[-1]))
    before = send(valid_messages, CASE_TIMEOUT_S)
    outcomes = []
    for case in cases:
        limit = limit_of(limits, modality)
        if case.needs_limit and limit is None:
            outcomes.append(Outcome(case.name, None, f"not applicable: the launch line sets no {modality} limit"))
            continue
        parts = case.parts(variant, modality, limit or 1)
        if parts is None:
            outcomes.append(Outcome(case.name, None, f"not applicable: the family takes {', '.join(variant.modalities)}"))
            continue
        messages = [m if m["role"] != "user" else {"role": "user", "content": [*parts, {"type": "text", "text": question}]}
                    for m in valid_messages]
        outcome = classify(case, send(messages, CASE_TIMEOUT_S))
        again = send(valid_messages, CASE_TIMEOUT_S)
        if not before.ok:
            outcome.valid_after = "same" if not again.ok else "served now (it was rejected before the bad requests)"
        elif not again.ok or fingerprint(again) != fingerprint(before):
            outcome.valid_after = (f"{again.status} {normalized(again.message)}" if not again.ok
                                   else "answered differently than before")
            outcome.failure = outcome.failure or "the next valid request is no longer answered as before"
        outcomes.append(outcome)
    return outcomes
