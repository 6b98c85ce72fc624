"""`python -m vlcheck.served.shared_fork_server SOCKET`: one render fork server for every process
started with VLCHECK_RENDER_FORK_SERVER=SOCKET, until this process is terminated.

The GPU tier (`scripts/gpu-tier.sh`) runs each family-config in a pytest process of its own; each
started its own fork server, importing vLLM once per family-config (50 imports, 16 side by side on
16 cores). `vlcheck check -j` shares one the same way, from inside (`served.render.shared_fork_server`).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from vlcheck.served.server import RenderForkServer


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    address = Path(argv[0]).absolute()
    if len(str(address).encode()) > 107:
        print(f"{address}: a Unix socket's path may not exceed 107 bytes; choose a shorter one", file=sys.stderr)
        return 2
    address.parent.mkdir(parents=True, exist_ok=True)
    server = RenderForkServer(address=address, own=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.launch()  # the socket exists when this returns: clients may connect (they wait for the import)
        print(f"render fork server: {address} (its log {server.log})", flush=True)
        while True:
            signal.pause()
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
