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


def _declaring_findings(*findings: str):
    return _variant_declaring(dataclasses.replace(HERE, findings=findings))


def test_a_declaration_naming_findings_covers_a_failure_of_those_only():
    variant = _declaring_findings("reused uuid")
    covered = CheckResult("llava", "template", Status.FAIL, "[single] reused uuid hit",
                          ["image: reused uuid hit", "video: reused uuid hit"])
    assert declared_deviation(covered, variant).status is Status.DEVIATION
    other = CheckResult("llava", "template", Status.FAIL, "[single] image: reused uuid hit",
                        ["image: reused uuid hit", "video: the engine died"])
    held = declared_deviation(other, variant)
    assert held.status is Status.FAIL
    assert held.details[0] == "video: the engine died"  # what the declaration does not name, first
    assert held.reason == "[single] video: the engine died (deviations.template covers only the findings 'reused uuid')"
    assert declared_deviation(held, variant).reason == held.reason  # applied twice, said once


def test_a_failure_without_details_is_held_to_the_findings_by_its_reason():
    variant = _declaring_findings("Current vLLM config is not set")
    said = CheckResult("aria", "template", Status.FAIL, "engine failed: AssertionError: Current vLLM config is not set.")
    assert declared_deviation(said, variant).status is Status.DEVIATION
    other = CheckResult("aria", "template", Status.FAIL, "engine failed: CUDA out of memory")
    assert declared_deviation(other, variant).status is Status.FAIL


def test_an_expected_failure_other_than_the_declared_one_fails_the_test():
    """`expect_deviation` makes a test a strict xfail; the reporting hook then holds the failure to the
    findings the declaration names (runners/plugin_reporting.py)."""
    from types import SimpleNamespace

    from vlcheck.runners.testing import EXPECTED, uncovered_failure

    item = SimpleNamespace(**{EXPECTED: [("generation", dataclasses.replace(HERE, findings=("config is not set",)))]})
    assert uncovered_failure(item, RuntimeError("AssertionError: Current vLLM config is not set")) is None
    said = uncovered_failure(item, RuntimeError("CUDA out of memory"))
    assert said == "deviations.generation covers only the findings 'config is not set'"
    whole = SimpleNamespace(**{EXPECTED: [("generation", HERE), ("cache", dataclasses.replace(HERE, findings=("x",)))]})
    assert uncovered_failure(whole, RuntimeError("anything")) is None  # one declaration covers every finding
    assert uncovered_failure(SimpleNamespace(), RuntimeError("anything")) is None


DECLARED_TESTS = '''
import dataclasses
from vlcheck.core.versions import installed
from vlcheck.runners.testing import expect_deviation
from vlcheck.spec.registry import get_family
from vlcheck.spec.schema import Declaration

HERE = Declaration("measured here", vllm=f"=={installed()['vllm']}", transformers=f"=={installed()['transformers']}",
                   findings=("config is not set",))
VARIANT = dataclasses.replace(get_family("llava").single, deviations={"cache": HERE})

def test_the_declared_failure(request):
    expect_deviation(request, VARIANT, "cache")
    raise AssertionError("Current vLLM config is not set")

def test_another_failure(request):
    expect_deviation(request, VARIANT, "cache")
    raise AssertionError("CUDA out of memory")
'''


def test_the_installed_plugin_fails_an_expected_failure_that_is_not_the_declared_one(tmp_path):
    """Through pytest and the plugin as installed (its reporting hook), outside the checkout's conftest."""
    import subprocess
    import sys

    pytest.importorskip("vllm")
    (tmp_path / "test_declared.py").write_text(DECLARED_TESTS)
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rfx",
                          "test_declared.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "1 failed, 1 xfailed" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "FAILED test_declared.py::test_another_failure" in ran.stdout
    assert "not the declared failure: deviations.cache covers only the findings 'config is not set'" in ran.stdout, \
        ran.stdout[-2000:]
