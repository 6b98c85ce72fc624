"""pytest plugin for scripts/bench-cpu-tier: times every synthetic checkpoint build.

Each process (controller and xdist workers) appends one line per build to a file in
$VLCHECK_BENCH_DIR: seconds, then the checkpoint folder's name.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def pytest_configure(config) -> None:
    out = os.environ.get("VLCHECK_BENCH_DIR")
    if not out:
        return
    from vlcheck.checkpoints import synthetic

    build = synthetic._build  # the one place a checkpoint is built (checkpoint_dir calls it on a cache miss)
    log = Path(out) / f"builds-{os.getpid()}.txt"

    def timed_build(spec, variant, recipe, staging, *args, **kwargs):
        start = time.perf_counter()
        try:
            return build(spec, variant, recipe, staging, *args, **kwargs)
        finally:
            with log.open("a") as f:
                f.write(f"{time.perf_counter() - start:.3f} {spec.name}-{variant.kind}\n")

    synthetic._build = timed_build


_marks: dict[str, float] = {}


def pytest_sessionstart(session) -> None:
    _marks["session start"] = time.time()


def pytest_runtest_logstart(nodeid, location) -> None:
    _marks.setdefault("first test", time.time())


def pytest_runtest_logfinish(nodeid, location) -> None:
    _marks["last test done"] = time.time()


def pytest_unconfigure(config) -> None:
    out = os.environ.get("VLCHECK_BENCH_DIR")
    if out and _marks:
        name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
        marks = {**_marks, "exit": time.time()}
        (Path(out) / f"timeline-{name}.txt").write_text("".join(f"{t:.3f} {k}\n" for k, t in marks.items()))
