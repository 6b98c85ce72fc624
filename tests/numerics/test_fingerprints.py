"""Processor fingerprints: the tensors vLLM's processor hands the model, per request shape, one line
per tensor (`vlcheck/snapshots/test_fingerprints/<config>.txt`): a preprocessing change names its tensor.
The catalogue's `fingerprints` check (fact `<variant>.fingerprints`)."""

import pytest

from vlcheck.core.results import Status
from vlcheck.runners.testing import assert_as_declared, fact_lines, run_check


def test_processor_fingerprints(family, variant, family_snapshot, request):
    result = run_check(request, "fingerprints", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    assert_as_declared(result, variant, declared_as="processor")
    if result.status is Status.DEVIATION:
        pytest.xfail(result.reason)
    header = [f"# tensors vLLM's processor hands the model: {family.name} [{variant.kind}] (synthetic checkpoint)"]
    assert "\n".join(header + fact_lines(result, variant, "fingerprints")) + "\n" == family_snapshot
