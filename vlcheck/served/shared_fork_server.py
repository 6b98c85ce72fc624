"""One render fork server shared by several processes (vLLM imported once for all of them): every
process whose environment has VLCHECK_RENDER_FORK_SERVER=SOCKET asks it instead of starting its own.

- `vlcheck check -j` shares one with its workers (`sharing()`, in `gate.checks`);
- `python -m vlcheck.served.shared_fork_server SOCKET` serves one until terminated: the GPU tier
  (`scripts/gpu-tier.sh`) runs each family-config in a pytest process of its own, and each started its
  own fork server, importing vLLM once per family-config (50 imports, 16 side by side on 16 cores).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from vlcheck.served.server import SHARED_ENV, RenderForkServer


@contextlib.contextmanager
def sharing(address: Path | None = None):
    """A fork server (at `address`, else a new socket) named in SHARED_ENV for the processes started
    inside. It starts importing at once; requests sent meanwhile wait in its socket's backlog."""
    server = RenderForkServer(address=address, own=True)
    server.launch()
    before = os.environ.get(SHARED_ENV)
    os.environ[SHARED_ENV] = str(server.address)
    try:
        yield server
    finally:
        if before is None:
            os.environ.pop(SHARED_ENV, None)
        else:
            os.environ[SHARED_ENV] = before
        server.close()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    address = Path(argv[0]).absolute()
    if len(str(address).encode()) > 107:
        print(f"{address}: a Unix socket's path may not exceed 107 bytes; choose a shorter one", file=sys.stderr)
        return 2
    address.parent.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with sharing(address) as server:  # the socket exists once this is entered: clients may connect
        print(f"render fork server: {address} (its log {server.log})", flush=True)
        while True:
            signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
