"""The `cpu_engine` report cell (numerics/engine_check.py) per family-config, on the engine the
other engine tests share: the engine's facts that `vlcheck diff` compares between two ends (token
counts, greedy tokens, goldens, agreement with transformers, cache hits). It judges nothing: each
engine test is its own cell with its own rule; this one fails only where vLLM refused a request. With --vlcheck-engine-report FILE the cells are written as a vlcheck report (one per
--vlcheck-shard; join them with `vlcheck merge`), the input of `vlcheck diff`: the engine facts of
one end of an upgrade from the same run as its engine tests, without starting every engine again."""

import pytest

from vlcheck.core.results import CheckResult, Status, from_exception
from vlcheck.gate.checks import CPU_ENGINE_CATALOGUE, run_variant
from vlcheck.runners.testing import fail_with

pytestmark = pytest.mark.cpu_engine
CHECK = CPU_ENGINE_CATALOGUE["cpu_engine"]


@pytest.fixture
def engine_platform() -> str:
    return "cpu"


@pytest.fixture
def engine_cells(engine_report_cells):
    """family name -> {variant kind: CheckResult} of the `cpu_engine` check (the plugin writes them)."""
    return engine_report_cells.setdefault(CHECK.name, {})


def test_engine_facts_as_reported(family, variant, engine_cells, request):
    try:
        handle = request.getfixturevalue("engine")  # a skip or a declared failure to start is a cell too
    except pytest.skip.Exception as outcome:
        _record(engine_cells, family, variant, Status.SKIP, str(outcome.msg))
        raise
    except pytest.xfail.Exception as outcome:
        _record(engine_cells, family, variant, Status.DEVIATION, str(outcome.msg))
        raise
    except pytest.fail.Exception as outcome:
        _record(engine_cells, family, variant, Status.FAIL, str(outcome.msg))
        raise
    except Exception as err:  # noqa: BLE001 - recorded as vLLM's failure or vlcheck's error, then re-raised
        result = from_exception(family.name, CHECK.name, err, f"[{variant.kind}]")
        engine_cells.setdefault(family.name, {})[variant.kind] = result
        raise
    result = run_variant(CHECK, family, variant, handle)
    engine_cells.setdefault(family.name, {})[variant.kind] = result
    request.node.user_properties.append(("facts", {k: v for k, v in result.data.items() if "logprobs" not in k}))
    if result.status not in (Status.PASS, Status.DEVIATION):
        fail_with(result, variant)


def _record(cells: dict, family, variant, status: Status, reason: str) -> None:
    cells.setdefault(family.name, {})[variant.kind] = CheckResult(family.name, CHECK.name, status,
                                                                  f"[{variant.kind}] {reason[:500]}")
