"""vLLM's GPU-less render server (`vllm launch render`) started on a machine without an accelerator.

vLLM's CUDA wheel cannot infer a device type on a CPU-only machine ("Failed to infer device
type" in `VllmConfig`); its own CLI switches to the CPU platform for `vllm bench` in that case
(`vllm/entrypoints/cli/main.py`). The launcher does the same, then hands the command line to
vLLM's CLI `main()` unchanged, so the server parses the user's flags and serves exactly as
`vllm launch render ...` would (vllm 0.24 and 0.32; the module behind the subcommand moved from
`vllm.entrypoints.cli.launch` to `vllm.entrypoints.launchers.render`, the CLI did not).

Two ways to run it:

- `python -m vlcheck.adapter.render_server MODEL [flags of vllm serve]`: one server;
- `python -m vlcheck.adapter.render_server --fork-server FD`: imports vLLM once (7 s idle, 20-30 s
  on a loaded 2-core machine), then forks one server per request, each a fresh process running
  vLLM's CLI on its own command line (about 1 s each). A test session needs one server per
  family-config; importing vLLM forty times would cost minutes. Requests come on the listening
  Unix socket FD, one connection each: in `{"argv": [...], "log": PATH, "env": {...}}`, out
  `{"pid": N}`, a JSON line each way. A socket, not a pipe, so that any process may ask: the
  workers of `vlcheck check -j` share one fork server (one import of vLLM, not one per worker). On
  end of stdin it stops its servers and exits; a server dies with it (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys

SUBCOMMAND = ("launch", "render")
MEMORY_ENV = "VLCHECK_SERVER_MEMORY_GB"
"""Address space a forked server may add to what it inherits (default 2 GiB): a request whose
processing would take more (a 1 x 4000 image upscaled by the model's processor took 8 GiB) fails
with MemoryError inside the server, instead of exhausting a shared machine."""


def use_cpu_platform() -> str:
    """Select vLLM's CPU platform where no accelerator was detected (what `vllm bench` does);
    returns the platform's name."""
    from vllm import platforms

    if platforms.current_platform.is_unspecified():
        from vllm.platforms.cpu import CpuPlatform

        platforms.current_platform = CpuPlatform()
    return type(platforms.current_platform).__name__


@contextlib.contextmanager
def cpu_platform():
    """vLLM's CPU platform for the duration, inside a process that goes on to do other things (a
    test worker, `vlcheck check`): the platform object every vLLM module already holds changes
    class and changes back after, as `adapter.numerics` does for its loader. Replacing the module's
    `current_platform`, as `use_cpu_platform` does for a server process, would leave the modules
    that imported the old object behind, and break the next engine or loader in that process."""
    from vllm.platforms import current_platform
    from vllm.platforms.cpu import CpuPlatform

    if not current_platform.is_unspecified():
        yield
        return
    original = current_platform.__class__
    current_platform.__class__ = CpuPlatform
    try:
        yield
    finally:
        current_platform.__class__ = original


def preload() -> None:
    """Import what vLLM's CLI imports before it parses a command line (the slow part)."""
    import vllm.entrypoints.cli.launch  # noqa: F401  (vllm 0.24, 0.32)
    import vllm.entrypoints.cli.serve  # noqa: F401
    import vllm.model_executor.model_loader  # noqa: F401  (the renderer imports it: 0.3 s a server)


def preload_model_modules() -> None:
    """Import vLLM's multimodal model modules, as a server would its model's (0.17 s each time): a
    fork server pays 1.2 s once (vLLM 0.24.0; 2.9 s for 0.32.0's 112), its servers nothing. One that
    fails to import (a missing optional package) is left to the server that needs it, to report."""
    import importlib

    from vllm.model_executor.models import registry

    for module in sorted({module for module, _ in getattr(registry, "_MULTIMODAL_MODELS", {}).values()}):
        try:
            importlib.import_module(f"vllm.model_executor.models.{module}")
        except Exception:  # noqa: BLE001,S112  (the server importing it says why)
            continue


def run(argv: list[str]) -> None:
    """`vllm launch render ARGV`, through vLLM's own CLI entry point."""
    use_cpu_platform()
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *SUBCOMMAND, *argv]
    main()


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: the fork server still stops its servers on end of input
        pass


def _limit_memory() -> None:
    import resource

    extra = float(os.environ.get(MEMORY_ENV, "2")) * (1 << 30)
    try:
        status = open("/proc/self/status").read()
        vm_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmSize:")))
    except (OSError, StopIteration, ValueError):
        return  # not Linux: no limit
    limit = int(vm_kib * 1024 + extra)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child(argv: list[str], log: str, env: dict[str, str]) -> None:
    os.environ.update(env)  # vLLM reads its VLLM_* settings when it uses them, after the fork
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.setpgid(0, 0)
    _die_with_parent()
    _limit_memory()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    code = 0
    try:
        run(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001  (the traceback goes to the server's log)
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def fork_server(listen_fd: int) -> None:
    import selectors
    import socket

    listener = socket.socket(fileno=listen_fd)
    listener.setblocking(False)  # a client that connected and left is not waited for
    os.dup2(2, 1)  # whatever vLLM prints goes to the log
    use_cpu_platform()
    preload()
    preload_model_modules()
    # Frozen, the inherited heap is out of the collector's reach: a server's start runs gc.collect()
    # three times (vLLM's freeze_gc_heap), 0.35 s over vLLM's imported modules, and collecting
    # would also copy the shared pages. With the preloads: a render server ready in 0.22 s, was 0.8-1.0.
    gc.collect()
    gc.freeze()
    _die_with_parent()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # servers are reaped as they exit
    children: list[int] = []
    events = selectors.DefaultSelector()
    events.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    events.register(listener, selectors.EVENT_READ, "socket")
    while True:
        if any(key.data == "stdin" and not os.read(key.fd, 4096) for key, _ in events.select()):
            break  # end of stdin: the owner is done (anything it writes there is only a keep-alive)
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            continue
        with connection:
            connection.settimeout(10.0)
            try:
                request = json.loads(connection.makefile("rb").readline())
            except (OSError, ValueError):
                continue  # a client that went away or sent nothing: no server for it
            pid = os.fork()
            if pid == 0:
                connection.close()
                listener.close()  # a server holding the socket would keep its clients waiting after we exit
                _child(request["argv"], request["log"], request.get("env") or {})
            children.append(pid)
            try:
                connection.sendall((json.dumps({"pid": pid}) + "\n").encode())
            except OSError:
                pass
    for pid in children:
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fork-server"]:
        fork_server(int(sys.argv[2]))
    else:
        run(sys.argv[1:])
