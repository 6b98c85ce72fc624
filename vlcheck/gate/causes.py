"""Findings grouped into causes, so a person reads ten decisions, not sixty cells.

A cause is one piece of evidence seen in several cells: the same words once versions, addresses,
paths, hashes, numbers and the family's own names are masked. Two kinds of cause sit above the
words, because every other cell of their family-config follows from them: an architecture that
left vLLM's registry, and an engine arg vLLM no longer accepts. Each cause says whose it is when
vlcheck can tell (the package of the innermost frame, or what the evidence names) and, where
measured points of the matrix place it, the first release where its cells went bad.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from vlcheck.core.results import frame_text, frames_text
from vlcheck.gate.measured import mask
from vlcheck.gate.root_errors import ImportRoot, ImportTimeRoot, importer, root_of
from vlcheck.spec.schema import KINDS

ROOTS = (
    ("architecture", re.compile(r"is not a supported architecture"), "vllm",
     "the architecture left vLLM's model registry"),
    ("engine_args", re.compile(r"is not an EngineArgs field|is not one of .*allowed values|does not fit its type"), "vllm",
     "vLLM no longer accepts an engine arg of the example"),
)
"""(check, evidence pattern, whose, what it means): a failing family-config of this kind explains
every other failing cell of the same family-config."""

_RAISED = re.compile(r"\b(vllm|transformers|tokenizers|torch)\b raised")
_HTTP = re.compile(r"\banswered (5\d\d)\b|\bHTTP (5\d\d)\b|\b(5\d\d) Internal Server Error")
_SERVED = re.compile(r"\bserved vs offline\b|\bchat request was rejected: 4\d\d\b")
_NUMBER = re.compile(r"\d+")
_KIND = re.compile(rf"\[({'|'.join(KINDS)})[^\]]*\]\s*")
_QUOTED_PATH = re.compile(r"(/[\w.+-]+){2,}")
_HEX = re.compile(r"\b[0-9a-f]{16,}\b")
_KIND_WORD = re.compile(rf"\b({'|'.join(KINDS)})\b")
_LEADING_FAMILY = re.compile(r"^<family>:\s*")
OWNERS = ("vllm", "transformers", "tokenizers")
"""Whose a frame is: a library's own dependencies (torch, PIL, huggingface_hub) count as the
library that called them, as `core.results.raised_by` decides error against fail."""


@dataclass
class Cell:
    family: str
    label: str
    """`check [kind]`, as the diff names it."""
    category: str
    """regression, new failure, lost coverage or moved."""
    evidence: str
    frames: list[dict] = field(default_factory=list)
    same_as_declared: bool = False
    """The candidate's cell fails plainly only because its declaration was measured on other
    versions: the finding is the declared one (the diff's re-measure list)."""

    @property
    def check(self) -> str:
        return self.label.split(" ")[0]

    @property
    def kind(self) -> str | None:
        found = re.search(r"\[(\w+)\]", self.label)
        return found.group(1) if found else None


@dataclass
class Cause:
    title: str
    whose: str
    why_whose: str
    cells: list[Cell] = field(default_factory=list)
    first_bad: str = ""
    frames: list[dict] = field(default_factory=list)
    key: str = ""
    """What a measured point's cell must show to count as this cause (`PointIndex.first_bad`)."""
    defining_check: str | None = None
    """For a cause above its cells (an architecture gone): the check whose failure is the cause."""

    @property
    def families(self) -> list[str]:
        return sorted({c.family for c in self.cells}, key=str.lower)

    @property
    def checks(self) -> list[str]:
        return sorted({c.check for c in self.cells})

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "whose": self.whose, "why_whose": self.why_whose, "first_bad": self.first_bad,
                "families": self.families, "checks": self.checks, "frames": self.frames,
                "cells": [{"family": c.family, "check": c.label, "category": c.category, "evidence": c.evidence,
                           "frames": c.frames} for c in self.cells]}

    def text(self, index: int) -> str:
        counted = ", ".join(f"{check} x{sum(c.check == check for c in self.cells)}" for check in self.checks)
        title = self.title
        if self.defining_check:  # one cause over several families: each family's own evidence
            title += ": " + "; ".join(dict.fromkeys(
                _first_line(_KIND.sub("", c.evidence), 120) for c in self.cells if c.check == self.defining_check))
        lines = [f"{index}. [{self.whose}] {title}",
                 f"   {len(self.cells)} cells ({counted}) in {len(self.families)} families: {', '.join(self.families)}",
                 f"   whose: {self.whose} ({self.why_whose})"]
        if self.first_bad:
            lines.append(f"   first bad: {self.first_bad}")
        if self.frames:
            lines.append("   raised at: " + frames_text(self.frames))
        return "\n".join(lines)




def key_of(evidence: str, family: str, names: list[str]) -> str:
    """The evidence with everything that differs between cells of one cause masked."""
    text = _KIND.sub("", mask(evidence))
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = text.replace(name, "<family>")
    text = _KIND_WORD.sub("<kind>", _HEX.sub("<hex>", _QUOTED_PATH.sub("<path>", text)))
    return _LEADING_FAMILY.sub("", _NUMBER.sub("N", text).strip())[:300]


def frame_key(frames: list[dict], evidence: str) -> str | None:
    """Cells raised at the same place with the same exception type are one cause, whatever each
    check wrote around it."""
    if not frames:
        return None
    kind = re.search(r"\b([A-Z]\w*(?:Error|Exception))\b", evidence)
    innermost = frames[-1]
    return f"frame:{innermost.get('file')}:{innermost.get('function')}:{kind.group(1) if kind else ''}"


def whose_of(evidence: str, frames: list[dict]) -> tuple[str, str]:
    owned = [f for f in frames if f.get("package") in OWNERS]
    if owned:
        via = f" (via {frames[-1].get('package')})" if owned[-1] is not frames[-1] else ""
        return owned[-1]["package"], f"innermost {owned[-1]['package']} frame {frame_text(owned[-1])}{via}"
    if frames:
        return frames[-1].get("package", "unknown"), f"innermost frame {frame_text(frames[-1])}"
    raised = _RAISED.search(evidence)
    if raised:
        return raised.group(1), f"the evidence says {raised.group(0)}"
    if _HTTP.search(evidence):
        return "vllm", "vLLM's server answered a 5xx (its own error, whatever it called)"
    if _SERVED.search(evidence):
        return "vllm", "vLLM's API server: its answer to the example's request (no frame: measured over HTTP)"
    return "unknown", "no frame and no owner in the evidence: read it"


def locate(report: dict, family: str, label: str) -> tuple[dict | None, dict, str | None]:
    """(cell, family-config unit, kind) of the diff's label `check [kind]`; the unit is the whole
    cell where the report does not split it, and empty where the report lacks the cell."""
    check, _, rest = label.partition(" ")
    cell = report.get("families", {}).get(family, {}).get("checks", {}).get(check)
    kind = rest.strip("[]") or None
    if cell is None:
        return None, {}, kind
    return cell, (cell.get("variants") or {}).get(kind, cell) if kind else cell, kind


def unit_of(report: dict, family: str, label: str) -> dict:
    return locate(report, family, label)[1]


def _names(report: dict, family: str) -> list[str]:
    row = report["families"].get(family, {})
    return [family, row.get("model", ""), row.get("model", "").split("/")[-1]]


def group(cells: list[Cell], new: dict, points: "PointIndex | None" = None) -> list[Cause]:
    """Causes, largest first; every cell in exactly one."""
    causes: dict[str, Cause] = {}
    rooted: dict[tuple[str, str | None], str] = {}
    for check, pattern, whose, meaning in ROOTS:
        for c in cells:
            if c.check == check and pattern.search(c.evidence) and not c.same_as_declared:
                key = f"root:{check}"
                causes.setdefault(key, Cause(meaning, whose, f"{check} fails: {meaning}", defining_check=check,
                                             key=pattern.pattern))
                rooted[(c.family, c.kind)] = key
    imports: dict[str, ImportRoot | ImportTimeRoot] = {}
    for c in cells:
        key = rooted.get((c.family, c.kind)) or rooted.get((c.family, None))
        root = root_of(c.evidence, _details(new, c)) if key is None and not c.same_as_declared else None
        if root is not None:  # one failed import, whatever words each path wrapped around it
            key = root.key
            imports[key] = root
            causes.setdefault(key, Cause(root.title, "", "", key=key_of(root.text, "", [])))
        if key is None and c.same_as_declared:
            key = "out-of-range"
            causes.setdefault(key, Cause(
                "declarations measured on other versions do not cover the candidate, whose cells show the declared "
                "behaviour (the diff's 're-measure' list): re-measure and widen each declaration's range",
                "vlcheck spec", "a declaration's version range, not a change of behaviour by itself", key="-"))
        if key is None:
            key = frame_key(c.frames, c.evidence) or key_of(c.evidence, c.family, _names(new, c.family))
            if key not in causes:
                whose, why = whose_of(c.evidence, c.frames)
                title = re.sub(rf"^{re.escape(c.family)}:\s*", "", _first_line(_KIND.sub("", c.evidence)))
                causes[key] = Cause(title, whose, why, frames=c.frames,
                                    key=key_of(c.evidence, c.family, _names(new, c.family)))
        causes[key].cells.append(c)
        if not causes[key].frames and c.frames:
            causes[key].frames = c.frames
    for key, root in imports.items():
        if isinstance(root, ImportRoot):
            _import_owner(causes[key], root, new)
        else:  # whoever's frame raised it, from any cell that kept frames
            cause = causes[key]
            cause.frames = next((c.frames for c in cause.cells if c.frames), [])
            cause.whose, cause.why_whose = whose_of(cause.title, cause.frames)
    ordered = sorted(causes.values(), key=lambda cause: (-len(cause.cells), cause.title))
    if points is not None:
        for cause in ordered:
            cause.first_bad = points.first_bad(cause)
    return ordered


def _details(report: dict, cell: Cell) -> list[str]:
    found = locate(report, cell.family, cell.label)[0] if report else None
    return [str(d) for d in (found or {}).get("details") or ()]


def _import_owner(cause: Cause, root: ImportRoot, new: dict) -> None:
    """A failed import is the pairing's: the importer (from any cell's frames) and the library that
    no longer has the name."""
    frame = importer(root, [c.frames for c in cause.cells])
    version = new.get("environment", {}).get(root.library)
    library = f"{root.library} {version}" if version else root.library
    if frame is not None:
        cause.frames = next(c.frames for c in cause.cells if frame in c.frames)
        cause.whose = f"{frame.get('package')} + {root.library}"
        cause.why_whose = (f"the pairing: {frame_text(frame)} imports {root.name or root.module}, which {library} "
                           f"does not have")
    else:  # the library that no longer has it (vLLM dropping a model's module, transformers a helper)
        cause.whose = root.library
        cause.why_whose = (f"{library} does not have {root.name or root.module}; no frame names the code that "
                           "imports it (a model's remote code, a family's recipe)")


def _first_line(text: str, limit: int = 220) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "…"


class PointIndex:
    """The matrix's measured points (`compat/points`): where along the two axes from the baseline
    (newer vLLM with the baseline's transformers; newer transformers with the baseline's vLLM) a
    cell first went bad.

    `store` holds the points (`.points`: each with `.vllm` and `.transformers`; `.cell(point, family,
    check)`: the measured cell or None) and `key` orders versions: `vlcheck.versions.points.point_index`
    builds one from the matrix's folder (the gate knows nothing of how points are stored)."""

    def __init__(self, store, key: Callable[[str], tuple], old_env: dict, new_env: dict):
        self.store = store
        self.key = key
        self.old = (old_env.get("vllm", ""), old_env.get("transformers", ""))
        self.new = (new_env.get("vllm", ""), new_env.get("transformers", ""))

    def _between(self, version: str, low: str, high: str) -> bool:
        return self.key(low) <= self.key(version) <= self.key(high)

    def axes(self) -> list[tuple[str, list]]:
        """The points from the baseline towards the candidate, one axis per package, in release order."""
        (v0, t0), (v1, t1) = self.old, self.new
        order = lambda p: (self.key(p.vllm), self.key(p.transformers))  # noqa: E731
        vllm_axis = [p for p in self.store.points if p.transformers == t0 and self._between(p.vllm, v0, v1)]
        tf_axis = [p for p in self.store.points if p.vllm == v0 and self._between(p.transformers, t0, t1)]
        return [("vLLM", sorted(vllm_axis, key=order)), ("transformers", sorted(tf_axis, key=order))]

    def first_bad(self, cause: Cause) -> str:
        """The first point after the baseline, along each axis, where a cell of the cause fails
        with the cause's evidence (a point's cell holds its reason, cut at 300 characters)."""
        if cause.key == "-":
            return "not a change of behaviour"
        cells = [c for c in cause.cells if cause.defining_check in (None, c.check)]
        if cause.defining_check is not None and len({c.family for c in cells}) > 1:
            per_family: dict[str, list[str]] = {}
            for family in sorted({c.family for c in cells}):
                one = Cause(cause.title, cause.whose, cause.why_whose, [c for c in cells if c.family == family],
                            key=cause.key, defining_check=cause.defining_check)
                per_family.setdefault(self.first_bad(one), []).append(family)
            return "; ".join(f"{where}: {', '.join(families)}" for where, families in per_family.items())
        found = []
        for label, axis in self.axes():
            first = None
            for point in axis:
                if (point.vllm, point.transformers) == self.old:
                    continue  # the baseline itself: what it holds is the starting point, not a change
                if any(self._shows(cause, point, c) for c in cells):
                    first = point
                    break
            if first is not None:
                version = first.vllm if label == "vLLM" else first.transformers
                other = f"transformers {first.transformers}" if label == "vLLM" else f"vLLM {first.vllm}"
                found.append(f"{label} {version} (with {other})")
        return "; ".join(found) or "not placed by the measured points (run `vlcheck matrix` or `vlcheck bisect`)"

    def _shows(self, cause: Cause, point, cell: Cell) -> bool:
        measured = self.store.cell(point, cell.family, cell.check) or {}
        if measured.get("status") != "fail":
            return False
        reason = measured.get("reason", "")
        if cause.defining_check is not None:
            return re.search(cause.key, reason) is not None
        return cause.key[:120] in key_of(reason, cell.family, [cell.family])
