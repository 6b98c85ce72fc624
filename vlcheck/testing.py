"""Helpers the pytest suite shares (kept out of conftest.py so that test modules can import them)."""

from __future__ import annotations

import pytest

from vlcheck.spec import Variant


def expect_deviation(request: pytest.FixtureRequest, variant: Variant, check: str) -> None:
    """A declared deviation of `check` (`Variant.deviations`) makes the test a strict expected
    failure: it shows as xfail with the reason, and fails the day the deviation stops happening,
    so the spec gets corrected."""
    if check in variant.deviations:
        request.applymarker(pytest.mark.xfail(reason=f"declared deviation: {variant.deviations[check]}", strict=True))
