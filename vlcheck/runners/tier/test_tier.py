"""Every family-config of the selected specs through vlcheck's checks: `pytest -m "not gpu"` runs
the catalogue's CPU checks (engine args, architecture, template, stops, vLLM's processor, its
tensors, placement, hostile inputs, the transformers reference, the served path); the engine tests
beside it (`engine/`, the same ones this repository runs) serve it with `pytest -m gpu`.
Declared deviations and skips work as in `vlcheck check`; a failure names family, variant, check."""

import pytest

from vlcheck.gate.checks import CATALOGUE
from vlcheck.runners.testing import assert_as_declared, run_check

PER_CONFIG = [c for c in CATALOGUE.values() if c.run is not None]
"""The catalogue's checks that run per family-config (`spec` compares a whole family with its example)."""


@pytest.mark.parametrize("check", PER_CONFIG, ids=lambda c: c.name)
def test_cpu_check(family, variant, check, request):
    result = run_check(request, check.name, family, variant)  # skips with the reason; None: as in --vlcheck-baseline
    if result is not None:
        assert_as_declared(result, variant, check.declared_as)

