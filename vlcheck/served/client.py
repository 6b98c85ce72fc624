"""An HTTP client for vLLM's OpenAI-compatible routes, as any user's code would call them.

httpx, not the `openai` package: the CPU tier needs vLLM's render and tokenize routes, which the
`openai` client does not know, and raw status codes and messages for bad requests; httpx comes
with vLLM (its own tests use it) and gives both with per-request timeouts. The GPU tier drives
`vllm serve` with the official `openai` client as well.

Every request goes on a fresh connection (`Connection: close`): vLLM 0.24's render server drops
a keep-alive connection after some 400 answers (the exception is re-raised into uvicorn after
the answer was sent), and the next request on it would read a reset that says nothing about the
request itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

REQUEST_TIMEOUT_S = 60.0


@dataclass
class Reply:
    status: int | None
    """The HTTP status; None when no answer came (timeout, connection error: see `error`)."""

    body: Any
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def message(self) -> str:
        """The server's error message (OpenAI's `{"error": {"message": ...}}`), or the transport error."""
        if self.error:
            return self.error
        if isinstance(self.body, dict):
            err = self.body.get("error")
            if isinstance(err, dict):
                return str(err.get("message", ""))
            if isinstance(err, str):
                return err
            if "detail" in self.body:  # FastAPI's own validation answers
                return str(self.body["detail"])
            return ""
        return "" if self.body is None else str(self.body)[:300]


def placeholder_ranges(features: dict) -> dict[str, list[tuple[int, int]]]:
    """The render route's `features.mm_placeholders` as (offset, length) per modality."""
    return {m: [(r["offset"], r["length"]) for r in ranges] for m, ranges in (features.get("mm_placeholders") or {}).items()}


class Client:
    def __init__(self, base_url: str, model: str | None = None, timeout_s: float = REQUEST_TIMEOUT_S):
        import httpx

        self.base_url, self.timeout_s = base_url, timeout_s
        # one client: building httpx's TLS context per request cost 70 ms each
        self._http = httpx.Client(base_url=base_url, headers={"Connection": "close"}, timeout=timeout_s, trust_env=False)
        self.model = model or self.models()[0]

    def _send(self, method: str, path: str, json: Any = None, timeout_s: float | None = None) -> Reply:
        import httpx

        began = time.monotonic()
        try:
            response = self._http.request(method, path, json=json, timeout=timeout_s or self.timeout_s)
        except httpx.TimeoutException as err:
            return Reply(None, None, time.monotonic() - began, f"no answer within {timeout_s or self.timeout_s:.0f} s "
                                                                f"({type(err).__name__})")
        except httpx.HTTPError as err:
            return Reply(None, None, time.monotonic() - began, f"{type(err).__name__}: {err}")
        try:
            body = response.json()
        except ValueError:
            body = response.text  # whole: a /metrics page runs to tens of kB (messages are cut by `message`)
        return Reply(response.status_code, body, time.monotonic() - began)

    def models(self) -> list[str]:
        reply = self._send("GET", "/v1/models")
        return [m["id"] for m in reply.body["data"]] if reply.ok else ["(unknown)"]

    def render_chat(self, messages: Any, timeout_s: float | None = None, **body: Any) -> Reply:
        """`POST /v1/chat/completions/render`: the token ids and multimodal features of a chat request."""
        return self._send("POST", "/v1/chat/completions/render",
                          {"model": self.model, "messages": messages, **body}, timeout_s)

    def chat(self, messages: Any, timeout_s: float | None = None, **body: Any) -> Reply:
        """`POST /v1/chat/completions` (a server with an engine)."""
        return self._send("POST", "/v1/chat/completions", {"model": self.model, "messages": messages, **body}, timeout_s)

    def tokenize_chat(self, messages: Any, **body: Any) -> Reply:
        """`POST /tokenize` with `messages`: the chat request's token ids."""
        return self._send("POST", "/tokenize", {"model": self.model, "messages": messages, **body})

    def detokenize(self, tokens: list[int]) -> Reply:
        return self._send("POST", "/detokenize", {"model": self.model, "tokens": tokens})

    def metrics(self) -> str:
        reply = self._send("GET", "/metrics")
        return reply.body if isinstance(reply.body, str) else ""
