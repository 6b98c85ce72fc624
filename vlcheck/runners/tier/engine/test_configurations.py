"""Each engine configuration users deploy (vlcheck/configurations/registry.py), per family-config:
the example's requests under it match the eager goldens, the output still sees its media, and the
configuration shows that its path ran (a chunk ending inside an image, a cached prefix ending inside
one, evictions under load, ...), or skips saying why. Selected with --vlcheck-config NAME|all; the
cell is the report's `cpu_engine.<name>` (`engine.<name>` on GPUs), written with
--vlcheck-engine-report for `vlcheck diff`."""

import json

import pytest

from vlcheck.core.results import CheckResult, Status
from vlcheck.runners.testing import fail_with, headline

pytestmark = pytest.mark.engine  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin


def test_configuration(family, variant, configuration, engine_platform, engine_report_cells, request):
    from vlcheck.configurations.checks import run

    config = configuration
    if config is None:
        from vlcheck.runners.pytest_plugin import NO_CONFIGURATION

        pytest.skip(NO_CONFIGURATION)
    cells = engine_report_cells.setdefault(config.check_name(engine_platform), {}).setdefault(family.name, {})
    try:  # an engine that does not start (or skips) is a cell too, once the configuration is selected
        config, handle = request.getfixturevalue("configured_engine")
    except (pytest.skip.Exception, pytest.xfail.Exception, pytest.fail.Exception) as outcome:
        status = {pytest.skip.Exception: Status.SKIP, pytest.xfail.Exception: Status.DEVIATION}.get(type(outcome), Status.FAIL)
        cells[variant.kind] = CheckResult(family.name, config.check_name(engine_platform), status,
                                          f"[{variant.kind}] {str(outcome.msg)[:500]}")
        raise
    result = run(config, family, variant, handle)
    cells[variant.kind] = result
    request.node.user_properties.append(("configuration", config.name))
    request.node.user_properties.append(("proof", json.dumps(result.data.get(f"{variant.kind}.proof"))))
    if result.status is Status.SKIP:
        pytest.skip(headline(result, variant))
    if result.status is Status.DEVIATION:
        pytest.xfail(headline(result, variant))
    if result.status is not Status.PASS:
        fail_with(result, variant)
