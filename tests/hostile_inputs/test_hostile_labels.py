"""The hostile check's labels on made-up outcomes (no vLLM run): a known_broken case that breaks is a
declared deviation inside its versions and a failure outside them, with the same finding, so that
`vlcheck diff` and the matrix see one behaviour (re-measure, not a regression)."""

from dataclasses import replace

from vlcheck.core.results import NOT_APPLIED, Status
from vlcheck.gate.diff import Diff, compare_unit
from vlcheck.hostile import inputs
from vlcheck.hostile.inputs import Outcome
from vlcheck.spec.registry import all_families
from vlcheck.spec.schema import Declaration

CASE = "own placeholder in question"
OUTCOMES = [Outcome(CASE, "broken", "ValueError <- StopIteration: "), Outcome("1x1 image", "handled", "35 prompt tokens")]


def _variant(declared_for: str):
    spec = all_families()["qwen2_vl"]
    variant = spec.variants[0]
    declaration = Declaration("measured here", declared_for, ">=5.0")
    return spec, replace(variant, known_broken={CASE: declaration})


def _check(monkeypatch, declared_for: str, outcomes=OUTCOMES):
    spec, variant = _variant(declared_for)
    monkeypatch.setattr(inputs, "run_cpu", lambda *_: outcomes)
    return variant, inputs.hostile_check(spec, variant)


def test_a_known_broken_case_is_declared_inside_its_versions_and_fails_outside_with_the_same_finding(monkeypatch):
    variant, inside = _check(monkeypatch, ">=0.1")
    _, outside = _check(monkeypatch, "==0.0.1")
    assert inside.status is Status.DEVIATION and "measured here" in inside.reason
    assert outside.status is Status.FAIL and "does not apply" in outside.reason
    assert inside.finding == outside.finding and CASE in inside.finding
    assert outside.data[f"{variant.kind}.{NOT_APPLIED}"] == f"known_broken.{CASE}"
    d = Diff({}, {})
    unit = lambda r: {"status": r.status.value, "reason": r.reason, "finding": r.finding}  # noqa: E731
    compare_unit(d, "qwen2_vl", "hostile", unit(inside), unit(outside), not_applied=True)
    assert not d.regressions and len(d.remeasure) == 1


def test_a_new_breakage_beside_a_declared_one_fails_and_a_fixed_one_says_stale(monkeypatch):
    worse = [*OUTCOMES, Outcome("CMYK image", "broken", "IndexError")]
    _, result = _check(monkeypatch, ">=0.1", worse)
    assert result.status is Status.FAIL and "CMYK image" in result.reason
    _, fixed = _check(monkeypatch, ">=0.1", [Outcome(CASE, "handled", "97 prompt tokens")])
    assert fixed.status is Status.FAIL and "now works" in fixed.reason
