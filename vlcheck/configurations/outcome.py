"""One configuration's cell for one family-config: what every configuration check returns.

A configuration passes only when it showed that its path ran (`proof`) and nothing it compares
moved; without the proof it skips and says why, whatever else it measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vlcheck.core.results import CheckResult, Status, declared_deviation
from vlcheck.spec.schema import CHECKS, FamilySpec, Variant


@dataclass
class Measured:
    facts: dict[str, Any] = field(default_factory=dict)
    """Compared by `vlcheck diff` (unless named in PROOF_FACTS / INFORMATIONAL)."""
    problems: list[str] = field(default_factory=list)
    proof: dict[str, Any] = field(default_factory=dict)
    """The counters that show the path ran (chunks ending inside images, cached tokens, evictions)."""
    not_exercised: str | None = None
    """Why the path did not run (None: it did)."""
    not_compared: str | None = None
    """Why nothing could be held to a golden here (vLLM's CPU build on a machine of an unrecorded class):
    the cell skips saying so, its path run or not."""
    frames: list[dict] = field(default_factory=list)
    reference: str = "the eager engine"
    """What the answers were held to, for the passing cell's reason."""

    def held_to_golden(self, compared: dict, golden: str) -> None:
        """`goldens.compare_shapes`'s result as the `golden` fact and a problem per move, naming `golden`."""
        self.facts["golden"] = [f"{shape}: {p}" for shape, (_, found) in compared.items() for p in found] or "match"
        self.problems += [f"against {golden} (within {rule}): {shape}: {p}"
                          for shape, (rule, found) in compared.items() for p in found]


INFORMATIONAL = ("proof", "engine_start_s", "distance_to_eager", "distance_to_unquantized", "distance_to_tp1",
                 "batch_dependence_nats", "media_change_nats", "server_start_s", "moved_nats")
"""Recorded for people, never compared: counters that follow the scheduler's batching, float distances."""


def cell(spec: FamilySpec, variant: Variant, check_name: str, configuration: str, measured: Measured) -> CheckResult:
    kind = variant.kind
    data = {f"{kind}.{k}": v for k, v in measured.facts.items()}
    data[f"{kind}.proof"] = measured.proof
    data[f"{kind}.path_ran"] = measured.not_exercised is None
    if measured.problems:  # a declaration covers the findings it names; any other fails the cell
        result = CheckResult(spec.name, check_name, Status.FAIL, f"[{kind}] {configuration}: {measured.problems[0]}",
                             measured.problems, data, frames=measured.frames)
        return as_declared(result, variant, configuration)
    if measured.not_compared is not None:
        return CheckResult(spec.name, check_name, Status.SKIP, f"[{kind}] {configuration}: {measured.not_compared}",
                           data=data)
    if measured.not_exercised is not None:
        return CheckResult(spec.name, check_name, Status.SKIP,
                           f"[{kind}] {configuration} did not exercise its path: {measured.not_exercised}", data=data)
    shown = ", ".join(f"{k} {v}" for k, v in measured.proof.items())
    return CheckResult(spec.name, check_name, Status.PASS, f"[{kind}] {configuration}: as {measured.reference}; path ran ({shown})",
                       data=data)


def as_declared(result: CheckResult, variant: Variant, configuration: str) -> CheckResult:
    """A configuration cell's failure against the variant's declaration of that configuration
    (`core.results.declared_deviation`: the findings it names, and nothing else, become the deviation)."""
    return declared_deviation(result, variant, declared_as=configuration) if configuration in CHECKS else result
