"""Helpers the pytest suite shares (kept out of conftest.py so that test modules can import them)."""

from __future__ import annotations

import pytest

from vlcheck.spec import FamilySpec, Variant


def config_id(family: FamilySpec, variant: Variant) -> str:
    """A family-config's test id, which also names its snapshot and golden files."""
    return f"{family.name}-{variant.kind}"


def assert_as_declared(result, variant: Variant) -> None:
    """A CPU check's result is a pass, or, where the spec declares a deviation of that check, the
    declared deviation: a deviation that no longer happens fails, so the spec gets corrected."""
    from vlcheck.results import Status

    if result.check in variant.deviations:
        assert result.status is Status.DEVIATION, (
            f"deviations.{result.check} is declared but the check {result.status.value}es now: "
            f"remove it from the spec ({result.reason})")
    else:
        assert result.status is Status.PASS, "\n".join([result.reason, *result.details])


def expect_deviation(request: pytest.FixtureRequest, variant: Variant, check: str) -> None:
    """A declared deviation of `check` (`Variant.deviations`) makes the test a strict expected
    failure: it shows as xfail with the reason, and fails the day the deviation stops happening,
    so the spec gets corrected."""
    if check in variant.deviations:
        request.applymarker(pytest.mark.xfail(reason=f"declared deviation: {variant.deviations[check]}", strict=True))
