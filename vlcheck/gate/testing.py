"""Helpers the pytest suite shares (kept out of conftest.py so that test modules can import them).

Every failing test says in its first line the family, the variant, the check and why. A check
that vlcheck itself could not run (status `error`, or a `SuiteError`) is reported by pytest as an
error, apart from the failures that describe vLLM's or transformers' behaviour (see conftest.py).
"""

from __future__ import annotations

import pytest

from vlcheck.core.results import CheckResult, Status, SuiteError, raised_by
from vlcheck.spec.schema import FamilySpec, Variant


def headline(result: CheckResult, variant: Variant) -> str:
    """`family [variant] check: status: reason`, the first line of every failure message."""
    reason = result.reason.removeprefix(f"[{variant.kind}] ")
    return f"{result.family} [{variant.kind}] {result.check}: {result.status.value}: {reason}"


def fail_with(result: CheckResult, variant: Variant, problem: str | None = None) -> None:
    lines = [headline(result, variant) if problem is None else f"{result.family} [{variant.kind}] {result.check}: {problem}"]
    lines += result.details if problem is None else [result.reason, *result.details]
    if result.status is Status.ERROR:
        raise SuiteError("\n".join(lines))
    pytest.fail("\n".join(lines), pytrace=False)


def require_ok(result: CheckResult, variant: Variant) -> None:
    """Pass, declared deviation or skip (with its reason); a failure or an error fails the test."""
    if result.status is Status.SKIP:
        pytest.skip(headline(result, variant))
    if result.status in (Status.FAIL, Status.ERROR):
        fail_with(result, variant)


def assert_as_declared(result: CheckResult, variant: Variant) -> None:
    """A CPU check's result is a pass, or, where the spec declares a deviation of that check for
    the installed versions, the declared deviation: a deviation that no longer happens fails, so
    the spec gets corrected."""
    if result.status is Status.ERROR:
        fail_with(result, variant)
    if variant.deviation(result.check) is not None:
        if result.status is not Status.DEVIATION:
            fail_with(result, variant, f"deviations.{result.check} is declared for "
                      f"{variant.deviations[result.check].scope} but the check {result.status.value}es now: "
                      "remove it from the spec or narrow its versions")
    elif result.status is not Status.PASS:
        fail_with(result, variant)


def expect_deviation(request: pytest.FixtureRequest, variant: Variant, check: str) -> None:
    """A declared deviation of `check` that applies to the installed versions makes the test a
    strict expected failure: it shows as xfail with the reason, and fails the day the deviation
    stops happening, so the spec gets corrected."""
    declared = variant.deviation(check)
    if declared is not None:
        request.applymarker(pytest.mark.xfail(reason=f"declared deviation ({declared.scope}): {declared.reason}",
                                              strict=True))


def is_suite_crash(excinfo: pytest.ExceptionInfo) -> bool:
    """A test failed because vlcheck's own code broke: a `SuiteError`, or an exception raised in
    vlcheck's code rather than vLLM's or transformers' (`core.results.raised_by`, the rule the
    report's `error` cells follow too). Assertions and pytest outcomes are never crashes."""
    if excinfo.errisinstance(SuiteError):
        return True
    if excinfo.errisinstance((AssertionError, pytest.fail.Exception, pytest.skip.Exception, pytest.xfail.Exception)):
        return False
    return raised_by(excinfo.value) == "vlcheck"
