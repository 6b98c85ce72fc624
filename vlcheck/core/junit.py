"""pytest's JUnit XML, read once for every reader of the tiers' results (the tables of `runners.tier_table`
and `runners.engine_tier`, the TP table of `engine.tensor_parallel`, the durations of `runners.shard`):
one outcome per test case, with an `error` (a fixture or setup that broke) kept apart from a failed
assertion, and the properties the tests record (`engine_start_s`, `proof`)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field

OUTCOMES = ("passed", "failed", "error", "xfailed", "skipped")


@dataclass(frozen=True)
class Case:
    name: str
    outcome: str
    """One of OUTCOMES."""
    message: str = ""
    """The first line of the failure, error or skip message (160 characters at most)."""
    properties: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    detail: str = ""
    """The whole failure, error or skip: its message and its text."""


def outcome(case: ET.Element) -> tuple[str, str, str]:
    """(outcome, first line of its message, its whole message and text)."""
    for tag in ("failure", "error", "skipped"):
        found = case.find(tag)
        if found is None:
            continue
        lines = (found.get("message") or found.text or "").strip().splitlines()
        first = lines[0][:160] if lines else ""
        detail = (found.get("message") or "") + "\n" + (found.text or "")
        if tag == "skipped":
            return ("xfailed" if found.get("type") == "pytest.xfail" else "skipped"), first, detail
        return ("failed" if tag == "failure" else "error"), first, detail
    return "passed", "", ""


def cases(document: str | bytes) -> Iterator[Case]:
    for case in ET.fromstring(document).iter("testcase"):
        result, message, detail = outcome(case)
        yield Case(case.get("name", ""), result, message,
                   {p.get("name"): p.get("value") for p in case.iter("property")},
                   float(case.get("time") or 0.0), detail)
