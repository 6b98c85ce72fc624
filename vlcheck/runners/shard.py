"""Split the families over n CI runners, balanced by the GPU tier's measured durations.

`--shard i/n` (pytest's `--vlcheck-shard`, `vlcheck check --shard`, `vlcheck tier gpu --shard`) keeps runner i's part; the CI job matrix starts the n runners, and
`vlcheck merge` puts their reports together. A family is never split: all its family-configs
run on one runner, so each shard's report holds whole rows of the family x check matrix.
The split is greedy, longest family first onto the least-loaded shard, with ties broken by
name and then by the lower shard, so every runner computes the same split from the same data.
A family-config missing from the data weighs the median of those measured.

`vlcheck tier shards N` prints the split into N shards; `vlcheck tier shards --update
gpu-out/summary.txt` refreshes the durations from a GPU tier run. The engine tier on vLLM's CPU build
weighs its families by its own data (`--vlcheck-shard-durations`, CPU_ENGINE_DURATIONS_FILE: its served
family-configs cost minutes there, seconds on a GPU); `--update-cpu-engine shard-*.xml` refreshes it
from that tier's JUnit files.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from vlcheck.spec.schema import KINDS, FamilySpec, config_id

DURATIONS_FILE = Path(__file__).with_name("gpu_durations.json")
CPU_ENGINE_DURATIONS_FILE = Path(__file__).with_name("cpu_engine_durations.json")
SUMMARY_LINE = re.compile(r"^(\S+) (\S+) rc=\d+ (\d+)s\b")
"""A family-config's line in the GPU tier's summary.txt: `family kind rc=0 45s ...`."""
TEST_ID = re.compile(rf"\[(?:cpu-|gpu-)?(.+?)-({'|'.join(KINDS)})(?:-[^\]]*)?\]")
"""A test's family-config in its JUnit name: `test_x[cpu-llava-next-single-chunked]` -> llava-next, single."""


@dataclass(frozen=True)
class Shard:
    index: int
    """1-based: shard 1 of n runs the tests that belong to no family."""
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
        if not match or not 1 <= int(match[1]) <= int(match[2]):
            raise ValueError(f"shard {text!r}: expected i/n with 1 <= i <= n, e.g. 1/2")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def load_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Seconds per family-config id (`family-kind`)."""
    return dict(json.loads(path.read_text())["seconds"])


def family_weights(specs: Iterable[FamilySpec], durations: dict[str, float]) -> dict[str, float]:
    """A family's expected seconds: the sum over its family-configs."""
    median = statistics.median(durations.values()) if durations else 1.0
    return {spec.name: sum(durations.get(config_id(spec, v), median) for v in spec.variants) for spec in specs}


def partition(weights: dict[str, float], count: int) -> list[list[str]]:
    """`count` lists of names, balanced by weight (greedy longest-first onto the least-loaded)."""
    shards: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for name in sorted(weights, key=lambda n: (-weights[n], n)):
        least = min(range(count), key=lambda i: (loads[i], i))
        shards[least].append(name)
        loads[least] += weights[name]
    return shards


def select(specs: Iterable[FamilySpec], shard: Shard | None,
           durations: dict[str, float] | None = None) -> list[FamilySpec]:
    """The specs that belong to `shard` (all of them when shard is None), in their given order."""
    specs = list(specs)
    if shard is None:
        return specs
    weights = family_weights(specs, load_durations() if durations is None else durations)
    mine = set(partition(weights, shard.count)[shard.index - 1])
    return [s for s in specs if s.name in mine]


def durations_from_summary(text: str) -> dict[str, float]:
    """Seconds per family-config id from a GPU tier summary.txt."""
    found = {}
    for line in text.splitlines():
        if match := SUMMARY_LINE.match(line):
            found[f"{match[1]}-{match[2]}"] = float(match[3])
    return found


def durations_from_junit(texts: Iterable[str]) -> dict[str, float]:
    """Seconds per family-config id: the sum of its tests' times in JUnit XML files (an engine tier's shards)."""
    from vlcheck.core import junit

    found: dict[str, float] = {}
    for text in texts:
        for case in junit.cases(text):
            if match := TEST_ID.search(case.name):
                key = f"{match[1]}-{match[2]}"
                found[key] = found.get(key, 0.0) + case.seconds
    return {key: round(seconds, 1) for key, seconds in found.items()}
