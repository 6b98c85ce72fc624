"""Declarations measured where they are used: `vlcheck matrix declarations [--write]`.

A spec's `deviations.<check>` (and `known_broken."<case>"`, measured by the hostile check) holds for
the vLLM and transformers versions it was measured on. The
matrix measures each declared cell at many points; where the cell's behaviour (`measured`: outcome,
evidence, facts) equals the reference's, the declaration describes those versions too. This widens
each declaration's upper bounds to the largest box of measured (or inferred) points, from the
reference up, that all behave as the reference: vLLM first (with the reference transformers), then
transformers (over those vLLM releases). It never narrows a range. Declarations whose behaviour
changed at a measured point are listed with the point, for a person to re-measure and re-word;
those of checks the matrix does not run (the GPU and pytest tiers) are listed as not measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from vlcheck.spec.registry import all_families
from vlcheck.versions.grid import Grid
from vlcheck.versions.points import Point, version_key


@dataclass
class Change:
    family: str
    variant: str
    check: str
    path: str
    old: tuple[str, str]
    new: tuple[str, str] | None
    """The widened (vllm, transformers) ranges; None when nothing widens."""
    changed_at: list[str]
    """Points where the behaviour differs from the reference's."""
    measured: bool = True
    table: str = ""
    """The declaration's table under its variant: `deviations.<check>` or `known_broken."<case>"`."""

    @property
    def name(self) -> str:
        return f"{self.variant}.{self.table}"


def _upper(spec: str) -> str | None:
    """The highest version a specifier admits among `==X` / `<=X` clauses (None: unbounded or other)."""
    highs = [s.version for s in SpecifierSet(spec) if s.operator in ("==", "<=")]
    return max(highs, key=version_key) if highs else None


def _lower(spec: str) -> str | None:
    lows = [s.version for s in SpecifierSet(spec) if s.operator in ("==", ">=")]
    return min(lows, key=version_key) if lows else None


def _range(low: str, high: str) -> str:
    return f"=={low}" if low == high else f">={low},<={high}"


def _box_same(grid: Grid, family: str, check: str, vllm: list[str], transformers: list[str]) -> bool | None:
    """True: every point of the box behaves as the reference (measured, or inferred between measured
    neighbours that agree); False: one differs; None: one is unknown."""
    ref_state, _, _ = grid.cell(grid.axes.reference, family)
    for v in vllm:
        for t in transformers:
            if grid.store.unmeasurable(Point(v, t)):
                continue  # a pairing that does not install (vLLM 0.32.0 caps transformers <5.20) holds nothing
            state, how, _ = grid.cell(Point(v, t), family)
            if state is None:
                return None
            if state[check]["key"] != ref_state[check]["key"]:
                return False
    return True


def widen(grid: Grid, write: bool = False) -> list[Change]:
    axes, ref = grid.axes, grid.axes.reference
    out = []
    for name, spec in all_families().items():
        for variant in spec.variants:
            # A known_broken case is measured by the hostile check, as a whole: widened only where
            # every case of the family behaves as at the reference.
            declared = [(f"deviations.{check}", check, decl) for check, decl in variant.deviations.items()]
            declared += [(f'known_broken."{case}"', "hostile", decl) for case, decl in variant.known_broken.items()]
            for table, check, decl in declared:
                old = (decl.vllm, decl.transformers)
                if check not in grid.checks or grid.state(ref, name) is None:
                    out.append(Change(name, variant.kind, check, spec.path, old, None, [], False, table))
                    continue
                changed = [str(p) for p in sorted(grid.store.points) if (s := grid.state(p, name)) is not None
                           and s[check]["key"] != grid.state(ref, name)[check]["key"]]
                v_hi, t_hi = ref.vllm, ref.transformers
                for v in axes.vllm[1:]:
                    if _box_same(grid, name, check, [v], axes.transformers[:axes.transformers.index(t_hi) + 1]):
                        v_hi = v
                    else:
                        break
                v_box = axes.vllm[:axes.vllm.index(v_hi) + 1]
                for t in axes.transformers[1:]:
                    if _box_same(grid, name, check, v_box, [t]):
                        t_hi = t
                    else:
                        break
                new = (_widened(decl.vllm, v_hi), _widened(decl.transformers, t_hi))
                out.append(Change(name, variant.kind, check, spec.path, old, new if new != old else None, changed,
                                  table=table))
    if write:
        for c in out:
            if c.new:
                _rewrite(Path(c.path), f"[{c.name}]", c.new)
    return out


def _widened(spec: str, high: str) -> str:
    old_high, low = _upper(spec), _lower(spec)
    if low is None or old_high is None or version_key(high) <= version_key(old_high):
        return spec  # never narrowed; a shape other than ==X or >=X,<=Y is left to a person
    return _range(low, high)


def _rewrite(path: Path, header: str, new: tuple[str, str]) -> None:
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip() == header)
    for i in range(start + 1, len(lines)):
        if lines[i].lstrip().startswith("["):
            break
        for key, value in zip(("vllm", "transformers"), new):
            if re.match(rf"\s*{key}\s*=", lines[i]):
                lines[i] = f'{key} = "{value}"\n'
    path.write_text("".join(lines))


def to_text(changes: list[Change]) -> str:
    widened = [c for c in changes if c.new]
    moved = [c for c in changes if c.measured and c.changed_at]
    unmeasured = [c for c in changes if not c.measured]
    lines = [f"widened ({len(widened)}):"]
    lines += [f"  {c.family} {c.name}: vllm {c.old[0]} -> {c.new[0]}, "
              f"transformers {c.old[1]} -> {c.new[1]}" for c in widened]
    lines.append(f"behaviour changed at a measured point ({len(moved)}): re-measure and re-word these")
    lines += [f"  {c.family} {c.name} ({c.old[0]}; {c.old[1]}): differs at "
              + ", ".join(c.changed_at[:4]) + (" ..." if len(c.changed_at) > 4 else "") for c in moved]
    lines.append(f"not measured by the matrix (GPU or pytest tier checks) ({len(unmeasured)}): "
                 + ", ".join(f"{c.family} {c.name}" for c in unmeasured))
    return "\n".join(lines) + "\n"
