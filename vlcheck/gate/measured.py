"""What a report cell measured, apart from how it is labelled: the ground bisect and the matrix compare.

A cell's status mixes what vLLM did with what the spec declares for the installed versions: the
same failure is a `declared deviation` inside a declaration's version range and a `fail` outside
it. Across releases only the behaviour counts: its outcome (a declared deviation is a failure that
was declared), its evidence (the failure's or skip's own words, with the installed versions and
vlcheck's note about declarations taken out) and its facts (token counts, prompts, hashes).
Two cells with equal behaviour are the same finding whatever their declarations say.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Iterable

from vlcheck.core.results import NOT_APPLIED

OUTCOME = {"pass": "pass", "declared deviation": "fail", "fail": "fail", "skip": "skip", "error": "error"}

_DECLARATION_NOTES = re.compile(
    r" \((?:the spec's deviations\.[\w.]+, measured on .*?: checked plainly"
    r"|deviations\.[\w.]+ is declared for .*? but did not happen)\)")

SAME, REGRESSED, FIXED, CHANGED, LOST, NOT_MEASURED = (
    "same", "regressed", "fixed", "changed", "lost coverage", "not measured")
SEVERITY = [NOT_MEASURED, REGRESSED, LOST, CHANGED, FIXED, SAME]
"""Worst first: a family's matrix cell shows its worst check."""


_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?(?:\+\w+)?(?![\w.])")


_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_CHECKPOINT = re.compile(r"(?<=-)[0-9a-f]{16}\b")


def mask_run_specific(text: str) -> str:
    """Object addresses in a quoted repr (`<PIL.Image.Image ... at 0x7F33...>`) differ from run to
    run, and a synthetic checkpoint's folder (`chameleon-e33fec1372388fd8`) is named by a hash of the
    versions: neither is behaviour."""
    return _CHECKPOINT.sub("<hash>", _ADDRESS.sub("0x...", text))


def mask(text: str) -> str:
    """Every release number (x.y.z) as <version>: a reason quotes the installed versions and, in a
    spec's own words, the reference's ("vLLM 0.24.0's processor ..."); neither is behaviour; nor
    what `mask_run_specific` masks."""
    return mask_run_specific(_VERSION.sub("<version>", text))


def behaviour(cell: dict, env: dict, informational: Iterable[str] = ()) -> dict[str, Any]:
    """The cell's outcome, evidence and facts, comparable across environments. `informational`: the
    facts its check records without comparing them (report schema 3 lists them per check)."""
    outcome = OUTCOME[cell["status"]]
    skip = set(informational)
    facts = {k: v for k, v in (cell.get("data") or {}).items()
             if not k.endswith("." + NOT_APPLIED) and k.split(".", 1)[-1] not in skip}
    evidence = ""
    if outcome != "pass" and cell.get("finding"):  # schema 3: what the failure measured, as recorded
        evidence = mask(_DECLARATION_NOTES.sub("", cell["finding"]))
    elif outcome != "pass":
        # a declared deviation keeps the failure's own words as its details (its reason is the spec's)
        words = cell.get("details") if cell["status"] in ("declared deviation", "fail") else None
        evidence = mask("; ".join(words) if words else _DECLARATION_NOTES.sub("", cell.get("reason", "")))
    return {"outcome": outcome, "evidence": evidence, "facts": json.loads(mask(json.dumps(facts, sort_keys=True)))}


def _compact(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value if len(text) <= 300 else {"sha256": hashlib.sha256(text.encode()).hexdigest()[:16], "chars": len(text)}


def digest(cell: dict, env: dict, informational: Iterable[str] = ()) -> dict[str, Any]:
    """A cell as the matrix keeps it: status and reason as reported, and its behaviour as a key
    (equal keys: equal behaviour) with the small facts (a large one as its hash) to show what moved."""
    b = behaviour(cell, env, informational)
    key = hashlib.sha256(json.dumps(b, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    return {"status": cell["status"], "outcome": b["outcome"], "reason": cell.get("reason", "")[:300], "key": key,
            "facts": {k: _compact(v) for k, v in b["facts"].items()}}


def classify(base: dict | None, cell: dict | None) -> str:
    """How `cell` differs from `base` (both digests), by behaviour alone."""
    if base is None or cell is None or "error" in (base["outcome"], cell["outcome"]):
        return NOT_MEASURED
    if base["key"] == cell["key"]:
        return SAME
    was, now = base["outcome"], cell["outcome"]
    if now == "fail" and was == "pass":
        return REGRESSED  # a fail -> fail whose evidence moved is a change to review (vlcheck diff: moved)
    if was == "fail" and now == "pass":
        return FIXED
    if now == "skip" and was != "skip":
        return LOST
    return CHANGED


def worst(labels) -> str:
    labels = list(labels)
    return min(labels, key=SEVERITY.index) if labels else SAME


def describe_change(base: dict, cell: dict) -> str:
    """One line for a person (both digests): the new failure's words, or the facts that moved."""
    if cell["outcome"] != "pass" and (cell["outcome"] != base["outcome"] or not _moved(base, cell)):
        return f"{base['outcome']} -> {cell['outcome']}: {cell['reason'][:240]}"
    parts = []
    for key in _moved(base, cell)[:3]:
        a, b = base["facts"].get(key), cell["facts"].get(key)
        if isinstance(a, dict) and isinstance(b, dict) and "sha256" not in a:
            parts += [f"{key}.{k}: {json.dumps(a.get(k))[:80]} -> {json.dumps(b.get(k))[:80]}"
                      for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)][:2]
        else:
            parts.append(f"{key}: {_short(a)} -> {_short(b)}")
    return f"{base['outcome']} -> {cell['outcome']}" + (": " + "; ".join(parts) if parts else "")


def _moved(a: dict, b: dict) -> list[str]:
    return [k for k in sorted(set(a["facts"]) | set(b["facts"])) if a["facts"].get(k) != b["facts"].get(k)]


def _short(value: Any) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, dict) and "sha256" in value:
        return f"({value['chars']} chars, sha256 {value['sha256']})"
    return json.dumps(value, ensure_ascii=False)[:80]
