"""Start, wait for and stop a vLLM server process on 127.0.0.1, whatever serves it.

Engine-agnostic: the same `Server` handle wraps `vllm launch render` (the CPU render server, no
engine), `vllm serve` on a GPU, and vLLM's CPU build (`python -m vllm.entrypoints.openai.api_server`), both
started by `vlcheck.engine.engine_server`.
A server is ready when `GET /health` answers 200; one that exits or stays unready past its time
limit raises `ServerFailed` with the tail of its log, so a test says why.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 10.0


class ServerFailed(RuntimeError):
    """The server exited or never became ready; the message ends with its log's last lines."""

    def __init__(self, message: str, log: Path | None = None):
        super().__init__(message)
        from vlcheck.core.results import frames_in_text

        text = ""
        if log is not None:
            try:
                text = Path(log).read_text(errors="replace")
            except OSError:
                pass
        self.frames = frames_in_text(text or message)
        """Where the server raised what stopped it: its log's last traceback (`core.results.frames_in_text`)."""
        raised = [line.strip() for line in text.splitlines() if _RAISED.search(line)
                  and "See root cause above" not in line]
        self.cause = raised[0] if raised else ""
        """The first exception its log names (an engine core's root cause comes before the launcher's), or ''."""


def free_port() -> int:
    """A port nobody listens on now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_RAISED = re.compile(r"\b[A-Za-z_.]*(Error|Exception|Exit)\b: ")


def log_tail(path: Path, lines: int = 15) -> str:
    """The log's last lines, after the exceptions raised anywhere in it (a server's engine core
    logs the root cause far above the launcher's closing traceback)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    causes = list(dict.fromkeys(line for line in text[:-lines] if _RAISED.search(line)
                                and "See root cause above" not in line))[:5]
    head = ["raised earlier in the log:", *causes, "...", ""] if causes else []
    return "\n".join(head + text[-lines:])


@dataclass
class Server:
    """One server process: its URL, process group and log."""

    argv: list[str]
    port: int
    log: Path
    pid: int
    process: subprocess.Popen | None = None
    """Set where the server is our child; a forked render server is the fork server's."""

    started_at: float = field(default_factory=time.monotonic)
    ready_after_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> "Server":
        import httpx

        deadline = self.started_at + timeout_s
        http = httpx.Client(timeout=2.0, trust_env=False)
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServerFailed(f"the server exited before it was ready ({' '.join(self.argv)}); its log "
                                   f"{self.log}:\n{log_tail(self.log)}", self.log)
            try:
                if http.get(f"{self.url}/health").status_code == 200:
                    self.ready_after_s = time.monotonic() - self.started_at
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # a render server is ready in about a second: polls are the wait
        self.stop()
        raise ServerFailed(f"the server was not ready after {timeout_s:.0f} s ({' '.join(self.argv)}); its log "
                           f"{self.log}:\n{log_tail(self.log)}", self.log)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def cpu_seconds(self) -> float | None:
        """CPU time the server process has used so far (Linux /proc; None elsewhere or once gone)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, graceful: bool = True) -> None:
        """SIGTERM to the server's process group, SIGKILL after STOP_TIMEOUT_S; at once where not
        `graceful` (a render server whose answers and log are read: its shutdown is only cost)."""
        steps = ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 2.0)) if graceful else ((signal.SIGKILL, 2.0),)
        for sig, wait in steps:
            if not self.alive():
                return
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.alive():
                time.sleep(0.02)


def start_command(argv: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> Server:
    """A server from a command line (`vllm serve ...`, `python -m vllm.entrypoints.openai.api_server ...`),
    in its own process group, its output in `log`."""
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env={**os.environ, **(env or {})})
    return Server(argv, port, log, process.pid, process)


SHARED_ENV = "VLCHECK_RENDER_FORK_SERVER"
"""The socket of a render fork server that a parent process owns (`vlcheck check -j`): its workers
ask that one instead of starting their own (`RenderForkServer.for_this_process`)."""


def _short_temp() -> str | None:
    """The temporary folder, or /tmp where its path would leave a Unix socket's over 107 bytes."""
    return None if len(tempfile.gettempdir()) < 64 or not os.path.isdir("/tmp") else "/tmp"


class RenderForkServer:
    """`vllm launch render` servers forked from one process that imported vLLM once
    (`vlcheck.adapter.render_server --fork-server`), asked over a Unix socket. Thread-safe. The
    owner starts the process on first use and stops it at `close()`; an attached one only asks."""

    def __init__(self, python: str = sys.executable, address: Path | None = None, own: bool | None = None):
        """`address`: the socket (default: a new one, owned); `own`: start the fork server there
        (default: only where no address is given)."""
        self.python = python
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.owner = address is None if own is None else own
        folder = Path(tempfile.mkdtemp(prefix="vlcheck-render-", dir=_short_temp())) if address is None else Path(address).parent
        self.address = Path(address) if address is not None else folder / "fork-server.sock"
        self.log = folder / "fork-server.log"

    @classmethod
    def for_this_process(cls) -> "RenderForkServer":
        """The shared one where a parent set SHARED_ENV, else one of our own."""
        shared = os.environ.get(SHARED_ENV)
        return cls(address=Path(shared)) if shared else cls()

    def launch(self) -> None:
        """Start the fork server if it is not running; returns at once. Requests sent meanwhile
        wait in the socket's backlog until it has imported vLLM."""
        with self._lock:
            if not self.owner or (self._process is not None and self._process.poll() is None):
                return
            self.address.unlink(missing_ok=True)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
                listener.bind(str(self.address))
                listener.listen(64)
                # servers log to files: INFO, whatever the caller's level (the detected content format is an INFO line)
                env = {**os.environ, "VLLM_LOGGING_LEVEL": "INFO"}
                env.pop(SHARED_ENV, None)
                with open(self.log, "wb") as err:
                    self._process = subprocess.Popen(
                        [self.python, "-m", "vlcheck.adapter.render_server", "--fork-server", str(listener.fileno())],
                        stdin=subprocess.PIPE, stdout=err, stderr=err, pass_fds=[listener.fileno()],
                        start_new_session=True, env=env)
            # only the fork server holds the socket now: if it dies, a client is refused, not left waiting

    def start(self, argv: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> Server:
        """A render server for `vllm launch render ARGV` (not yet ready: call `wait_ready`), with
        `env` added to its environment."""
        self.launch()
        request = json.dumps({"argv": argv, "log": str(log), "env": env or {}}) + "\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(READY_TIMEOUT_S)  # the fork server answers once it has imported vLLM
                client.connect(str(self.address))
                client.sendall(request.encode())
                reply = client.makefile("rb").readline()
        except OSError as err:
            raise ServerFailed(f"the render fork server at {self.address} did not answer ({type(err).__name__}: "
                               f"{err}); its log {self.log}:\n{log_tail(self.log)}", self.log) from None
        if not reply.strip():
            raise ServerFailed(f"the render fork server died; its log {self.log}:\n{log_tail(self.log)}", self.log)
        return Server(["vllm", "launch", "render", *argv], port, log, json.loads(reply)["pid"])

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._process.stdin.close()
                try:
                    self._process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._process.kill()
            self._process = None
