"""An engine that dies, hangs or never comes up ends its tests in seconds, with its last words.

vLLM 0.24.0's `LLM` waits forever when its engine core process dies under a request: its monitor
thread marks the engine dead and stops the output thread, but the `get_output` already waiting on
the output queue is never told (v1/engine/core_client.py). A DeepSeek engine core killed by
SIGFPE so held its family-config until the GPU tier's per-config time limit, with nothing in the log.

So every engine runs watched: its processes are the children the start created (found through
`multiprocessing`, not vLLM's internals), their output goes to a log file of their own, and a
thread waits on their exit. When one exits, or a call outlives its deadline, the thread signals
the main thread, whose handler raises `EngineDied` out of whatever the call was waiting on, with
the exit signal and the tail of the engine's log: the test fails (or xfails as declared) within
a second, and the next one is told the engine is gone.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = float(os.environ.get("VLCHECK_ENGINE_START_TIMEOUT", 240))
"""An engine not up after this long never comes up (cold starts on a fresh H200: 108-114 s)."""
CALL_TIMEOUT_S = float(os.environ.get("VLCHECK_ENGINE_CALL_TIMEOUT", 240))
"""A call to a live engine that takes longer hangs (the tiny checkpoints answer in seconds; the
hostile inputs' own deadline, 180 s, comes first)."""
LAST_WORDS_LINES = 25
INTERRUPT = signal.SIGUSR1


DEATH_SEEN_WITHIN_S = 10.0
"""After vLLM reported its engine dead, how long the watchdog may take to see the process exit."""


class EngineDied(BaseException):
    """The engine's processes exited, or it stopped answering; the message holds its last words.
    A BaseException, so that the `except Exception` around a request (hostile inputs classify
    every error as an outcome) does not take the engine's death for the request's answer."""


def log_dir() -> Path:
    """Where engines' logs go: `VLCHECK_ENGINE_LOGS` (the GPU tier keeps them with its evidence)."""
    path = Path(os.environ.get("VLCHECK_ENGINE_LOGS") or Path(tempfile.gettempdir()) / "vlcheck-engine-logs")
    path.mkdir(parents=True, exist_ok=True)
    return path


def settled(log: Path, quiet: float = 0.3, limit: float = 3.0) -> None:
    """Wait until the log stops growing (at most `limit` s): a process that has just exited may
    still have its last lines (the exception) on the way to the file; without them a declared
    finding that names the exception cannot be told from another death (tarsier's fp8 engine, H100)."""
    end, size = time.monotonic() + limit, -1
    while time.monotonic() < end:
        now = log.stat().st_size if log.exists() else 0
        if now == size:
            return
        size = now
        time.sleep(quiet)


EMPTY_LOG = "(the engine's log is empty)"


def last_words(log: Path, lines: int = LAST_WORDS_LINES) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError as err:
        return f"(no engine log: {err})"
    return "\n".join(text[-lines:]) if text else EMPTY_LOG


def last_words_or_traceback(log: Path, err: BaseException, frames: int = 6) -> str:
    """The engine log's tail; an engine core in this process (vLLM's CPU build) fails before it
    writes a line, and then the Python frames that raised are its last words."""
    words = last_words(log)
    if words != EMPTY_LOG:
        return f"\nIts last words ({log}):\n{words}"
    import traceback

    stack = traceback.extract_tb(err.__traceback__)[-frames:]
    return (f"\nThe engine's log is empty ({log}); where it was raised in this process:\n"
            + "".join(traceback.format_list(stack)).rstrip())


def exit_description(code: int | None, exited: bool = False) -> str:
    if code is None:
        return "exited (another waiter took its exit code)" if exited else "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


@contextmanager
def _output_to(log: Path):
    """Children started inside inherit stdout and stderr pointing at `log`; ours are restored after."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with open(log, "ab", buffering=0) as f:
        for fd in saved:
            os.dup2(f.fileno(), fd)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def exit_code(process, within: float = 2.0) -> int | None:
    """The exit code of a process whose sentinel fired. Another thread may have reaped it (vLLM's
    engine monitor, or whoever joins it): then `exitcode` reads None until that thread has stored
    the code, which a loaded CI machine showed as "still running" for a process killed by SIGFPE."""
    end = time.monotonic() + within
    while True:
        process.join(timeout=0.1)
        if process.exitcode is not None or time.monotonic() > end:
            return process.exitcode
        time.sleep(0.02)


class Watchdog:
    """Watches one engine: `starting()` around its construction, `call()` around every use."""

    def __init__(self, name: str):
        self.name = name
        self.log = log_dir() / f"{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}.log"
        self.dead: str | None = None
        self._deadline: float | None = None  # monotonic time after which the current call hangs
        self._what = ""
        self._armed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident
        self._previous_handler = None
        self._seen: list = []  # every process the start created, alive or not
        self._collecting = False
        self._started: list = []
        self._detected_at = self._armed_at = 0.0
        self.died_after_s: float | None = None
        """Seconds from noticing the death to raising it in the main thread."""

    # -- the main thread ---------------------------------------------------------------------
    @contextmanager
    def starting(self, timeout: float = START_TIMEOUT_S):
        """Around the engine's construction: its children's output goes to the log, and a start
        that outlives `timeout`, or whose processes die, raises EngineDied with the log's tail."""
        os.environ.setdefault("PYTHONFAULTHANDLER", "1")  # a fatal signal prints the Python stack
        before = set(multiprocessing.active_children())
        self._collecting = True
        self._install()
        self._arm(f"start (limit {timeout:.0f} s)", timeout)
        try:
            with _output_to(self.log):
                self._watch(lambda: [p for p in multiprocessing.active_children() if p not in before])
                yield
        except BaseException:
            self._disarm()
            self.stop(kill=True)
            raise
        finally:
            # the engine's processes are those its start created: a process started later (a
            # transformers reference in a fresh child, core.fresh_process) is not the engine
            self._started = [p for p in multiprocessing.active_children() if p not in before]
            self._collecting = False
        self._disarm()

    @contextmanager
    def call(self, what: str, timeout: float = CALL_TIMEOUT_S):
        if self.dead is not None:
            raise EngineDied(self.dead)
        self._arm(what, timeout)
        try:
            yield
        except Exception as err:
            # An AsyncLLM (the shared engine) reports its core's death as an exception of its own
            # (vLLM's EngineDeadError) before this watchdog sees the process exit: deepseek_vl_v2's
            # declared SIGFPE became 4 errors instead of its xfail on an H100. The death is the outcome;
            # disarmed first, so that the watch only records it while this waits (no second interrupt)
            self._disarm()
            if type(err).__name__ == "EngineDeadError" or any(not p.is_alive() for p in self._seen):
                deadline = time.monotonic() + DEATH_SEEN_WITHIN_S
                while self.dead is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                if self.dead is not None:
                    raise EngineDied(self.dead) from err
            raise
        finally:
            self._disarm()

    def stop(self, kill: bool = False) -> None:
        """Stop watching; `kill`: end the engine's processes that are still alive (after a death
        or a failed start, where vLLM's own shutdown may wait on them)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if kill:
            for p in self._seen:
                if p.is_alive():
                    p.kill()
        if self._previous_handler is not None and threading.current_thread().ident == self._main:
            signal.signal(INTERRUPT, self._previous_handler)
            self._previous_handler = None

    def _install(self) -> None:
        if threading.current_thread().ident != self._main:
            return  # signals reach the main thread only: elsewhere, vLLM's own waits apply
        self._previous_handler = signal.signal(INTERRUPT, self._interrupted)

    def _interrupted(self, signum, frame) -> None:
        if self._armed and self.dead is not None:
            self._armed = False
            self.died_after_s = time.monotonic() - self._detected_at
            raise EngineDied(self.dead)

    def _arm(self, what: str, timeout: float) -> None:
        self._armed_at = time.monotonic()
        self._what, self._deadline, self._armed = what, self._armed_at + timeout, True

    def _disarm(self) -> None:
        self._armed, self._deadline = False, None

    # -- the watching thread: from the start until stop() --------------------------------------
    def _watch(self, children) -> None:
        self._thread = threading.Thread(target=self._loop, args=(children,), daemon=True,
                                        name=f"vlcheck-watchdog-{self.name}")
        self._thread.start()

    def _loop(self, children) -> None:
        while not self._stop.is_set():
            try:
                current = children() if self._collecting else self._started
            except Exception:  # noqa: BLE001 - the process table changing under us: look again
                current = []
            for p in current:
                if p not in self._seen:
                    self._seen.append(p)
            sentinels = {p.sentinel: p for p in self._seen}
            ready = multiprocessing.connection.wait(list(sentinels), timeout=0.2) if sentinels else []
            if not sentinels:
                time.sleep(0.2)
            if self._stop.is_set():
                return
            if ready and self.dead is None:
                p = sentinels[ready[0]]
                self._declare(f"{self.name}: the engine's process {p.name} (pid {p.pid}) {exit_description(exit_code(p), exited=True)} "
                              f"during {self._what or 'no call (between requests)'}")
                return
            deadline = self._deadline
            if self._armed and deadline is not None and time.monotonic() > deadline and self.dead is None:
                self._declare(f"{self.name}: no answer from the engine during {self._what}: it hangs")
                return

    def _declare(self, headline: str) -> None:
        self._detected_at = time.monotonic()
        into = f" ({self._detected_at - self._armed_at:.1f} s into it)" if self._armed else ""
        settled(self.log)
        self.dead = f"{headline}{into}. Its last words ({self.log}):\n{last_words(self.log)}"
        if self._armed:
            signal.pthread_kill(self._main, INTERRUPT)


class Watched:
    """An `LLM` whose every method call runs under its watchdog (`llm.generate(...)` as before)."""

    def __init__(self, llm, watchdog: Watchdog):
        self._llm, self._watchdog = llm, watchdog

    def __getattr__(self, name: str):
        attr = getattr(self._llm, name)
        if not callable(attr):
            return attr

        def watched(*args, **kwargs):
            with self._watchdog.call(f"LLM.{name}"):
                return attr(*args, **kwargs)

        return watched
