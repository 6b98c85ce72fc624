"""Calls that may hang or blow up memory, run in a forked child so that they cannot take the
caller down: each call gets a deadline and an address-space allowance beyond what the process
has already loaded.

One child runs a batch of calls in turn (a fork per call cost more than most calls: the parent's
page tables are copied, and the child re-copies every page Python touches). A call that raises,
hangs or dies ends its child, and the next call gets a fresh one, so a call never runs after
one that failed in the same process.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import sys
import time
from typing import Any, Callable

from vlcheck.core.results import root_cause

GIB = 1 << 30


class Hang(Exception):
    pass


class OverMemory(Exception):
    pass


class ChildError(Exception):
    """An exception raised in the guarded child, with its root cause's type and message."""

    def __init__(self, name: str, message: str, cause_name: str, cause_message: str, cause_mro: list[str],
                 owner: str = "vllm", frames: list[dict] | None = None):
        super().__init__(message)
        self.name, self.cause_name, self.cause_message, self.cause_mro = name, cause_name, cause_message, cause_mro
        self.owner = owner
        """Whose code raised it (`core.results.raised_by`): `vlcheck` means a crash of vlcheck, not an outcome."""
        self.frames = list(frames or [])
        """Where the child raised it (`core.results.frames_of`, measured in the child: its traceback stays there)."""


def guarded(fn: Callable[[], Any], timeout_s: int, memory_gb: int) -> Any:
    """`fn()` in a forked child: its result, or its exception (as ChildError), Hang or OverMemory."""
    value, error = guarded_calls([fn], timeout_s, memory_gb)[0]
    if error is not None:
        raise error
    return value


def guarded_calls(calls: list[Callable[[], Any]], timeout_s: int, memory_gb: int) -> list[tuple[Any, Exception | None]]:
    """Each call's (result, None) or (None, ChildError | Hang | OverMemory), in order: each call
    runs with `timeout_s` seconds and `memory_gb` GB beyond the child's size when it starts."""
    results: list[tuple[Any, Exception | None]] = []
    while len(results) < len(calls):
        results += _one_child(calls, len(results), timeout_s, memory_gb)
    return results


def _one_child(calls, start: int, timeout_s: int, memory_gb: int) -> list[tuple[Any, Exception | None]]:
    """The results of calls[start:] from one child, up to and including the first that fails."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            _serve(calls[start:], write, memory_gb)
        finally:
            os._exit(0)
    os.close(write)
    results, pending, deadline_at = [], b"", time.monotonic() + timeout_s
    try:
        while True:
            while len(pending) >= 8 and len(pending) >= 8 + (size := int.from_bytes(pending[:8], "little")):
                results.append(_result(pickle.loads(pending[8:8 + size]), memory_gb))
                pending, deadline_at = pending[8 + size:], time.monotonic() + timeout_s
            if start + len(results) == len(calls) or (results and results[-1][1] is not None):
                break  # all answered, or the child ends after a failed call
            left = deadline_at - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                results.append((None, Hang(f"no answer after {timeout_s} s")))
                break
            chunk = os.read(read, 1 << 20)
            if not chunk:  # the child died in the middle of a call
                results.append((None, OverMemory(f"the process died (needs more than {memory_gb} GB?)")))
                break
            pending += chunk
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    return results


def _serve(calls, write: int, memory_gb: int) -> None:
    """In the child: run the calls in turn, each under its memory allowance, and send each
    payload; stop after the first that fails."""
    _single_threaded()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    for fn in calls:
        limit = _vm_size() + memory_gb * GIB
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        try:
            payload = ("ok", fn())
        except MemoryError:
            payload = ("memory", None)
        except BaseException as err:  # noqa: BLE001 - sent to the parent to classify
            from vlcheck.core.results import frames_of, raised_by

            cause = root_cause(err)
            payload = ("error", (type(err).__name__, str(err)[:2000], type(cause).__name__, str(cause)[:2000],
                                 [c.__name__ for c in type(cause).__mro__], raised_by(err), frames_of(err)))
        frame = pickle.dumps(payload)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        _write_all(write, len(frame).to_bytes(8, "little") + frame)
        if payload[0] != "ok":
            return


def _result(payload: tuple[str, Any], memory_gb: int) -> tuple[Any, Exception | None]:
    kind, value = payload
    if kind == "memory":
        return None, OverMemory(f"needs more than {memory_gb} GB of memory")
    if kind == "error":
        return None, ChildError(*value)
    return value, None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _single_threaded() -> None:
    """In a forked child: torch's CPU thread pool was forked in whatever state the parent's
    threads left it, and a processor that then runs a parallel op deadlocks (every llava-next-video
    case hung after the processor tests had used the pool in the same pytest worker)."""
    torch = sys.modules.get("torch")  # no pool to worry about where the parent never loaded torch
    if torch is not None:
        torch.set_num_threads(1)
