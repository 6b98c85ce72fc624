"""The outcome of one check on one family: what the report matrix and the tests share."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    PASS = "pass"
    DEVIATION = "declared deviation"
    FAIL = "fail"
    SKIP = "skip"


@dataclass
class CheckResult:
    family: str
    check: str
    status: Status
    reason: str = ""
    """For fail and skip: why, in one line. For a declared deviation: the spec's reason."""

    details: list[str] = field(default_factory=list)
    """Longer evidence: diffs, per-item findings."""

    data: dict[str, Any] = field(default_factory=dict)
    """Machine-readable facts for reports and diffs (template sha256, token counts, ...)."""


def declared_deviation(result: CheckResult, variant, declared_as: str | None = None) -> CheckResult:
    """A failure the variant declares (`deviations.<check>`, or `declared_as`) becomes a declared
    deviation: reported with the spec's reason, keeping the failure's evidence."""
    key = declared_as or result.check
    if result.status is not Status.FAIL or key not in variant.deviations:
        return result
    return CheckResult(result.family, result.check, Status.DEVIATION, f"[{variant.kind}] {variant.deviations[key]}",
                       result.details or [result.reason], result.data)


def combine(family: str, check: str, results: list[CheckResult]) -> CheckResult:
    """One result from several (per variant): the worst status wins; skips only if all skip."""
    if not results:
        return CheckResult(family, check, Status.SKIP, "nothing to check")
    order = [Status.FAIL, Status.DEVIATION, Status.PASS, Status.SKIP]
    worst = min((r.status for r in results), key=order.index)
    picked = [r for r in results if r.status is worst]
    return CheckResult(
        family, check, worst,
        reason="; ".join(dict.fromkeys(r.reason for r in picked if r.reason)),
        details=[d for r in results for d in r.details],
        data={k: v for r in results for k, v in r.data.items()},
    )
