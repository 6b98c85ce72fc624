"""pytest's JUnit XML read once for every table of the tiers (`tier_table`, `engine_tier`): one
outcome per test case, with an `error` (a fixture or setup that broke) kept apart from a failed
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


def outcome(case: ET.Element) -> tuple[str, str]:
    for tag in ("failure", "error", "skipped"):
        found = case.find(tag)
        if found is None:
            continue
        lines = (found.get("message") or found.text or "").strip().splitlines()
        first = lines[0][:160] if lines else ""
        if tag == "skipped":
            return ("xfailed" if found.get("type") == "pytest.xfail" else "skipped"), first
        return ("failed" if tag == "failure" else "error"), first
    return "passed", ""


def cases(document: str | bytes) -> Iterator[Case]:
    for case in ET.fromstring(document).iter("testcase"):
        result, message = outcome(case)
        yield Case(case.get("name", ""), result, message,
                   {p.get("name"): p.get("value") for p in case.iter("property")})
