"""Shards that take whole families from one queue (`--vlcheck-shard i/n --vlcheck-shard-claims DIR`).

The fixed split (vlcheck/runners/shard.py) balances by durations measured on one end of an upgrade;
the other end differs: on vLLM 0.32.0's CPU build the engine tier's shards took 416 s and 574 s
(CI rehearsal 11), because families that fail fast there and families that take longer fell
unevenly. Here every shard process collects every family and walks the same queue, longest family
first by the same durations; it runs a family only if it claims it first, by creating the file
DIR/<family> (O_EXCL: one process wins). A shard that finishes early takes the next family
instead of waiting for the other. A family is never split, so each shard's report holds whole
rows, as with the fixed split; the tests of no family run in shard 1. DIR must start empty: claims
made before the shard started (an earlier run's) would leave their families unrun, so they stop the
run instead.
"""

from __future__ import annotations

import os
import statistics
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

NO_FAMILY = "(no family)"
LEEWAY_S = 60.0
"""How much earlier than this shard a sibling shard may have started (they start side by side)."""


def stale_claims(folder: Path, started: float) -> list[str]:
    """The families claimed in `folder` before this shard started (an earlier run's)."""
    if not folder.is_dir():
        return []
    return sorted(urllib.parse.unquote(p.name) for p in folder.iterdir() if p.stat().st_mtime < started - LEEWAY_S)


def claim(folder: Path, family: str) -> bool:
    """Whether this process takes `family`: the first process to ask does."""
    try:
        os.close(os.open(folder / urllib.parse.quote(family, safe=""), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def queue(groups: dict[str, list[Any]], weights: dict[str, float]) -> list[str]:
    """The families in the order every shard walks them: the tests of no family first, then the
    longest family first (a family without a measured weight counts as the median), ties by name."""
    median = statistics.median(weights.values()) if weights else 1.0
    return sorted(groups, key=lambda name: (name != NO_FAMILY, -weights.get(name, median), name))


def claimed(groups: dict[str, list[Any]], order: Iterable[str], folder: Path) -> Iterator[Any]:
    """The items of the families this process claims, a family at a time, in queue order. A family
    is claimed only when its first item is asked for."""
    for name in order:
        if claim(folder, name):
            yield from groups[name]


def run_claimed(session, folder: Path, weights: dict[str, float], family_of, started: float) -> None:
    """pytest's run loop over the claimed families. Each test's `nextitem` is the one this process
    runs next (its fixtures' teardown depends on it), so the next family is claimed as the last
    test of the current one starts. `started`: when this shard started (time.time())."""
    if stale := stale_claims(folder, started):
        pytest.exit(f"--vlcheck-shard-claims {folder}: {len(stale)} famil{'y was' if len(stale) == 1 else 'ies were'} "
                    f"claimed before this shard started ({', '.join(stale[:5])}{', ...' if len(stale) > 5 else ''}): "
                    "an earlier run's claims, whose families would not run; give each run an empty folder",
                    returncode=pytest.ExitCode.USAGE_ERROR)
    groups: dict[str, list[Any]] = {}
    for item in session.items:
        groups.setdefault(family_of(item) or NO_FAMILY, []).append(item)
    folder.mkdir(parents=True, exist_ok=True)
    items = claimed(groups, queue(groups, weights), folder)
    item = next(items, None)
    while item is not None:
        nextitem = next(items, None)
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = nextitem
