"""The `cpu_engine` report cell (`vlcheck check --cpu-engine`, numerics/engine_check.py) per
family-config, on the engine the other engine tests share: it passes, or deviates only as
declared; its facts are what `vlcheck diff` compares between the two ends of an upgrade."""

import pytest

from vlcheck.core.results import Status
from vlcheck.gate.checks import CPU_ENGINE_CATALOGUE, run_variant
from vlcheck.gate.testing import fail_with

pytestmark = pytest.mark.cpu_engine


@pytest.fixture
def engine_platform() -> str:
    return "cpu"


def test_engine_facts_as_reported(family, variant, engine, request):
    result = run_variant(CPU_ENGINE_CATALOGUE["cpu_engine"], family, variant, engine)
    request.node.user_properties.append(("facts", {k: v for k, v in result.data.items() if "logprobs" not in k}))
    if result.status not in (Status.PASS, Status.DEVIATION):
        fail_with(result, variant)
