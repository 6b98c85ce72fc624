"""`vlcheck store verify`: measure a sample of the result store's cells again and compare.

Only cells stored under this environment's keys can be verified (the same vlcheck code, spec,
packages' code, Hub files): a stored cell that differs from what is measured now was stored for
code it did not measure, or its check is not deterministic. Either way it is a vlcheck bug: the
cell is taken out of the store and named.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Iterable

from vlcheck.gate.checks import Check, run_cell
from vlcheck.gate.diff import Diff, compare_cell
from vlcheck.gate.report import cell_of
from vlcheck.gate.store import ResultStore
from vlcheck.spec.schema import FamilySpec


@dataclasses.dataclass
class Verified:
    family: str
    check: str
    differences: list[str]

    @property
    def same(self) -> bool:
        return not self.differences


def stored_cells(store: ResultStore, families: Iterable[FamilySpec], checks: dict[str, Check]):
    """(spec, name, check, key, stored result) of every cell stored under this environment's key."""
    for spec in families:
        for name, check in checks.items():
            key = store.key(check, spec)
            found = store.get(key, counted=False)
            if found is not None:
                yield spec, name, check, key, found


def differences(family: str, check: Check, stored: dict, measured: dict) -> list[str]:
    """What `vlcheck diff` would list between the stored cell and the one measured now."""
    d = Diff({}, {})
    compare_cell(d, family, check.name, stored, measured, set(check.informational), check.tolerance)
    lines = [c.text() for c in (*d.regressions, *d.moved, *d.lost_coverage)] + d.not_run + d.fixed + d.gained
    if not lines and stored["status"] != measured["status"]:
        lines.append(f"{family} {check.name}: status {stored['status']} -> {measured['status']}")
    return lines


def verify(store: ResultStore, families: Iterable[FamilySpec], checks: dict[str, Check], sample: int | None,
           seed: int = 0, progress: Callable[[int, int, str, str], None] | None = None) -> tuple[list[Verified], int]:
    """Measure `sample` (None: all) of the stored cells again; a differing one is taken out of the
    store. Returns what was verified and how many cells were stored for this environment."""
    found = list(stored_cells(store, families, checks))
    chosen = found if sample is None or sample >= len(found) else random.Random(seed).sample(found, sample)
    out = []
    for i, (spec, name, check, key, stored) in enumerate(chosen, 1):
        if progress:
            progress(i, len(chosen), spec.name, name)
        measured = run_cell(check, spec, store=None)
        result = Verified(spec.name, name, differences(spec.name, check, cell_of(stored), cell_of(measured)))
        if not result.same:
            store.remove(key, [v.kind for v in spec.variants])
        out.append(result)
    return out, len(found)
