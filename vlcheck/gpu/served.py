"""A real OpenAI-compatible vLLM server with an engine, per family-config: `vllm serve` on a GPU,
or vLLM's CPU build (`python -m vllm.entrypoints.openai.api_server`, the CPU engine tier). The
same checkpoint and flags as the GPU tier's engines (`engines.engine_args`: real weights where
cached, else seeded synthetic ones), written as the flags a user types, and the model's chat
template where the checkpoint has none.

The helpers here only speak HTTP to the server (vlcheck.served.client, the official `openai`
client in the tests), so they judge any engine the same way.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vlcheck.served.launch import flag
from vlcheck.served.server import Server, free_port, start_command
from vlcheck.spec.schema import FamilySpec, Variant, config_id

def _vllm_cli() -> list[str]:
    """The `vllm` console script beside this Python or on PATH; else the module it runs
    (`vllm.entrypoints.cli.main`, the same code): an install without console scripts, as vLLM
    unpacked onto PYTHONPATH on a GPU runner, has the CLI but no `vllm` file."""
    beside = Path(sys.executable).with_name("vllm")
    script = str(beside) if beside.is_file() else shutil.which("vllm")
    return [script] if script else [sys.executable, "-m", "vllm.entrypoints.cli.main"]


SERVE_COMMANDS: dict[str, Callable[[], list[str]]] = {
    "vllm serve": lambda: [*_vllm_cli(), "serve"],
    "api_server": lambda: [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model"],
}
"""How to start the server: the CLI (`vllm serve MODEL`), or the module entry point (vLLM's CPU
build, whose `vllm` console script fails on importlib.metadata.version("vllm"))."""

# Engine args that a server takes from its own flags, or that have no CLI form.
NOT_FLAGS = {"model", "tokenizer", "disable_log_stats"}


@dataclass
class EngineServer:
    server: Server
    weights: str
    flags: list[str]


def serve_flags(spec: FamilySpec, variant: Variant, weights: str, extra: dict[str, Any] | None = None) -> tuple[str, list[str], str]:
    """(model folder, flags, weights used) for a family-config's engine server."""
    from vlcheck.gpu.engines import engine_args
    from vlcheck.served.render import chat_template_for

    args, used, local = engine_args(spec, variant, weights)
    args.update(extra or {})
    flags: list[str] = []
    for key, value in args.items():
        if key not in NOT_FLAGS and value is not None:
            flags += flag(key, value)
    template, _ = chat_template_for(variant, Path(tempfile.mkdtemp(prefix=f"vlcheck-serve-{config_id(spec, variant)}-")),
                                    local)
    if template is not None:
        flags += ["--chat-template", str(template)]
    flags += ["--served-model-name", variant.model]
    return local, flags, used


def start_engine_server(spec: FamilySpec, variant: Variant, weights: str = "auto", command: str = "vllm serve",
                        extra: dict[str, Any] | None = None, ready_timeout_s: float = 600.0) -> EngineServer:
    """Start and wait for the server (raises ServerFailed with its log's tail)."""
    local, flags, used = serve_flags(spec, variant, weights, extra)
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix=f"vlcheck-serve-{config_id(spec, variant)}-")) / "server.log"
    argv = [*SERVE_COMMANDS[command](), local, *flags, "--host", "127.0.0.1", "--port", str(port)]
    server = start_command(argv, port, log)
    return EngineServer(server.wait_ready(ready_timeout_s), used, flags)


def metric(metrics_text: str, name: str) -> float:
    """The sum of a Prometheus counter's samples (`vllm:mm_cache_hits` or `..._total`)."""
    total = 0.0
    for line in metrics_text.splitlines():
        m = re.match(rf"^{re.escape(name)}(?:_total)?(?:\{{[^}}]*\}})?\s+([0-9.eE+-]+)$", line)
        if m:
            total += float(m.group(1))
    return total


def as_golden(choice: Any, prompt_tokens: int) -> dict[str, Any]:
    """An OpenAI chat choice (logprobs requested with `return_tokens_as_token_ids`) in the form
    `goldens.compare` takes: {prompt_tokens, token_ids, top_logprobs: [{id: logprob}]}."""
    def token_id(token: str) -> int:
        return int(token.split(":", 1)[1])

    content = choice.logprobs.content or []
    return {"prompt_tokens": prompt_tokens,
            "token_ids": [token_id(t.token) for t in content],
            "top_logprobs": [{str(token_id(top.token)): round(float(top.logprob), 4) for top in t.top_logprobs}
                             for t in content]}
