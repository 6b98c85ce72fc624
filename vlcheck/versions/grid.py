"""The compatibility matrix's data as read: its axes (`axes.json`: the vLLM and transformers releases,
the priority ones) and its grid (the measured points of a store, per family: measured, inferred or
unknown cells). `matrix` measures it; `compat_report` and `declarations` read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vlcheck.gate.measured import NOT_MEASURED, classify, worst
from vlcheck.versions.points import Point, Store, version_key

AXES_FILE = "axes.json"


@dataclass
class Axes:
    vllm: list[str]
    transformers: list[str]
    priority_vllm: list[str]
    priority_transformers: list[str]

    @property
    def reference(self) -> Point:
        return Point(self.vllm[0], self.transformers[0])

    def save(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / AXES_FILE).write_text(json.dumps(self.__dict__, indent=1) + "\n")

    @classmethod
    def load(cls, root: Path) -> "Axes":
        return cls(**json.loads((root / AXES_FILE).read_text()))


class Grid:
    """The measured points of a store, read per family: measured, inferred or unknown cells."""

    def __init__(self, store: Store, axes: Axes):
        self.store, self.axes = store, axes
        self.checks = sorted({c for p in store.points.values() for row in p.get("cells", {}).values() for c in row})
        self.families = sorted({f for p in store.points.values() for f in p.get("cells", {})})

    def state(self, point: Point, family: str) -> dict[str, dict] | None:
        """The family's digests at the point when every check was measured there."""
        row = self.store.measured(point).get(family)
        if not row or any(c not in row for c in self.checks):
            return None
        return row

    @staticmethod
    def same(a: dict | None, b: dict | None) -> bool:
        return a is not None and b is not None and all(a[c]["key"] == b[c]["key"] for c in a)

    def _line(self, point: Point, along: str) -> list[Point]:
        if along == "transformers":
            return [Point(point.vllm, t) for t in self.axes.transformers]
        return [Point(v, point.transformers) for v in self.axes.vllm]

    def _known(self, point: Point, family: str, along: str | None) -> tuple[dict | None, list[Point]]:
        """Measured, or (with `along`) inferred from the nearest measured neighbours on that line that agree."""
        state = self.state(point, family)
        if state is not None or along is None:
            return state, [point]
        line = self._line(point, along)
        i = line.index(point)
        below = next((p for p in reversed(line[:i]) if self.state(p, family) is not None), None)
        above = next((p for p in line[i + 1:] if self.state(p, family) is not None), None)
        if below and above and self.same(self.state(below, family), self.state(above, family)):
            return self.state(below, family), [below, above]
        return None, []

    def cell(self, point: Point, family: str) -> tuple[dict | None, str, list[Point]]:
        """(digests, how: measured/inferred/unknown, evidence points). Inferred: between the nearest
        measured neighbours on the row, or the column, that agree; else between the nearest rows above
        and below whose cells at this transformers are known that way and agree."""
        state = self.state(point, family)
        if state is not None:
            return state, "measured", [point]
        for along in ("transformers", "vllm"):
            state, evidence = self._known(point, family, along)
            if state is not None:
                return state, "inferred", evidence
        rows = [Point(v, point.transformers) for v in self.axes.vllm]
        i = rows.index(point)
        below = next(((p, k) for p in reversed(rows[:i]) if (k := self._known(p, family, "transformers"))[0]), None)
        above = next(((p, k) for p in rows[i + 1:] if (k := self._known(p, family, "transformers"))[0]), None)
        if below and above and self.same(below[1][0], above[1][0]):
            return below[1][0], "inferred", below[1][1] + above[1][1]
        return None, "unknown", []

    def label(self, point: Point, family: str, against: Point | None = None) -> tuple[str, str, list[Point]]:
        """(worst classification against the reference (or `against`), how, evidence)."""
        state, how, evidence = self.cell(point, family)
        base, _, _ = self.cell(against or self.axes.reference, family)
        if state is None or base is None:
            return NOT_MEASURED, how, evidence
        return worst(classify(base[c], state[c]) for c in self.checks), how, evidence

    def since_along(self, family: str, check: str, fixed: Point, along: str) -> tuple[str | None, str | None, bool]:
        """On the line through `fixed`, the first release whose cell differs from `fixed`'s:
        (last same, first different, exact: adjacent releases measured)."""
        line = [p for p in self._line(fixed, along) if version_key(_coord(p, along)) >= version_key(_coord(fixed, along))]
        base = self.state(fixed, family)
        if base is None:
            return None, None, False
        last_same = fixed
        for p in line[1:]:
            state = self.state(p, family)
            if state is None:
                continue
            if state[check]["key"] != base[check]["key"]:
                values = [_coord(q, along) for q in line]
                exact = values.index(_coord(p, along)) == values.index(_coord(last_same, along)) + 1
                return _coord(last_same, along), _coord(p, along), exact
            last_same = p
        return _coord(last_same, along), None, True


def _coord(point: Point, along: str) -> str:
    return point.transformers if along == "transformers" else point.vllm
