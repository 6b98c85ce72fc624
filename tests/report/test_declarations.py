"""Declared deviations apply only to the versions they were measured on; outside them the check
runs plainly and says that the declaration did not apply."""

import dataclasses

import pytest

from vlcheck.core.results import CheckResult, Status, declared_deviation
from vlcheck.core.versions import installed
from vlcheck.spec.registry import get_family
from vlcheck.spec.schema import Declaration

HERE = Declaration(reason="measured here", vllm=f"=={installed()['vllm']}",
                   transformers=f"=={installed()['transformers']}")
ELSEWHERE = Declaration(reason="measured on an old vLLM", vllm="<0.1", transformers=">=0")


@pytest.mark.parametrize("vllm, transformers, applies", [
    ("0.24.0", "5.16.1", True), ("0.32.0", "5.19.0", True), ("0.33.0", "5.19.0", False),
    ("0.24.0", "5.20.0", False), (None, "5.16.1", False), ("0.30.0rc1", "5.17.0", True),
])
def test_a_declaration_applies_inside_its_measured_range(vllm, transformers, applies):
    declared = Declaration("r", vllm=">=0.24.0,<=0.32.0", transformers=">=5.16.1,<=5.19.0")
    assert declared.applies(vllm, transformers) is applies


def _variant_declaring(declaration):
    variant = get_family("llava").single
    return dataclasses.replace(variant, deviations={"template": declaration})


def test_inside_its_range_a_failure_becomes_the_declared_deviation():
    failed = CheckResult("llava", "template", Status.FAIL, "[single] differs")
    result = declared_deviation(failed, _variant_declaring(HERE))
    assert result.status is Status.DEVIATION and "measured here" in result.reason


def test_outside_its_range_the_check_runs_plainly_and_says_so():
    variant = _variant_declaring(ELSEWHERE)
    assert variant.deviation("template") is None
    failed = declared_deviation(CheckResult("llava", "template", Status.FAIL, "[single] differs"), variant)
    assert failed.status is Status.FAIL
    assert "measured on vllm <0.1, transformers >=0, does not apply to vllm" in failed.reason
    passed = declared_deviation(CheckResult("llava", "template", Status.PASS, "[single] same"), variant)
    assert passed.status is Status.PASS and "does not apply" in passed.reason
    assert passed.data == {"single.declaration_not_applied": "template"}


def test_a_declaration_out_of_range_is_noted_once_when_applied_twice():
    variant = _variant_declaring(ELSEWHERE)  # a check applies its declaration, then checks.per_variant again
    once = declared_deviation(CheckResult("llava", "template", Status.FAIL, "[single] differs"), variant)
    assert declared_deviation(once, variant).reason == once.reason and once.reason.count("does not apply") == 1


def test_a_declared_deviation_that_did_not_happen_says_so():
    passed = declared_deviation(CheckResult("llava", "template", Status.PASS, "[single] same"), _variant_declaring(HERE))
    assert passed.status is Status.PASS and "is declared for" in passed.reason and "did not happen" in passed.reason


def test_an_error_is_never_turned_into_a_declared_deviation():
    error = CheckResult("llava", "template", Status.ERROR, "vlcheck crashed")
    assert declared_deviation(error, _variant_declaring(HERE)) is error
