"""pytest configuration shared by every tier: options, the family list, snapshot fixtures.

The tiers are selected by marker: `pytest -m "not gpu"` (CPU, what CI runs) and `pytest -m gpu`.
Tests marked `engine` run on a live vLLM engine on either platform: once on GPUs (marked `gpu`)
and once on vLLM's CPU build (marked `cpu_engine`: part of `-m "not gpu"`, where they skip saying
why unless vLLM's CPU build is installed; `pytest -m cpu_engine` selects them alone).
"""

from __future__ import annotations

import pytest

from dataclasses import dataclass

from vlcheck.gate.testing import expect_deviation, is_suite_crash
from vlcheck.prompt.snapshots import FamilySnapshot
from vlcheck.spec.registry import SpecError, all_families, spec_errors
from vlcheck.spec.schema import config_id


def pytest_configure(config: pytest.Config) -> None:
    # xdist workers (-n auto) already fill every core; torch's own thread pool in each of them only
    # contends and spins (a third of the CPU tier's CPU time on 2 cores). Set before workers start.
    if getattr(config.option, "numprocesses", None):
        import os

        os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlcheck")
    group.addoption("--vlcheck-family", action="append", default=[], metavar="NAME",
                    help="only check these families (repeatable); default: all specs")
    group.addoption("--vlcheck-variant", choices=("single", "multi_image"), default=None,
                    help="only this example of each family (the GPU runner uses one process per family-config)")
    group.addoption("--vlcheck-weights", choices=("auto", "real", "synthetic", "seeded"), default="auto",
                    help="GPU tier: auto (default) = real checkpoints where in the HF cache, else synthetic ones "
                         "with seeded weights (dummy where none can be drawn); real; seeded; synthetic = vLLM's "
                         "dummy loading, whose outputs cannot detect numerical changes")
    group.addoption("--vlcheck-update-goldens", action="store_true",
                    help="GPU tier: record greedy goldens instead of comparing with them")
    group.addoption("--vlcheck-cache-off", action="store_true",
                    help="GPU tier: also check each family with the processor cache disabled (a second engine each)")
    group.addoption("--vlcheck-shard", type=_shard, default=None, metavar="I/N",
                    help="run shard I of N: whole families, balanced by measured durations (vlcheck/gate/shard.py); "
                         "tests that belong to no family run in shard 1")
    group.addoption("--vlcheck-serve", action="append", default=[], metavar="FAMILY",
                    help="engine tiers: also start vLLM's API server for these families or family-configs "
                         "(repeatable: qwen2_vl, qwen2_vl-single, all) and "
                         "check it over HTTP against the offline engine (tests/served_engine/; a second engine each)")
    group.addoption("--vlcheck-engine-report", metavar="FILE",
                    help="CPU engine tier: write its cpu_engine report cells as a vlcheck report (the input of "
                         "`vlcheck diff`; per --vlcheck-shard, joined by `vlcheck merge`)")
    group.addoption("--vlcheck-tp", type=int, default=None, metavar="N",
                    help="GPU tier: compare each family-config served at tensor_parallel_size N with TP=1 "
                         "(tests/gpu_generation/test_tensor_parallel.py; N GPUs per family-config)")


def _shard(text: str):
    from vlcheck.gate.shard import Shard

    try:
        return Shard.parse(text)
    except ValueError as err:
        raise pytest.UsageError(f"--vlcheck-shard: {err}") from None


def selected_families(config: pytest.Config) -> list[str]:
    """The selected family names, those whose spec does not load included."""
    names = sorted([*all_families(), *spec_errors()], key=str.lower)
    wanted = config.getoption("--vlcheck-family")
    if wanted:
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise pytest.UsageError(f"--vlcheck-family: unknown family {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    shard = config.getoption("--vlcheck-shard")
    if shard is not None:
        from vlcheck.gate.shard import select

        loaded = all_families()
        mine = {s.name for s in select([loaded[n] for n in names if n in loaded], shard)}
        # a spec that does not load has no measured duration: its (failing) tests run in shard 1
        names = [n for n in names if n in mine or (n not in loaded and shard.index == 1)]
    return names


@dataclass(frozen=True)
class UnloadableSpec:
    """Stands in for a family whose spec file does not load: its tests fail with the loader's
    message (see `_spec_must_load`), and every other family runs."""

    name: str
    error: SpecError


ENGINE_PLATFORMS = [pytest.param("gpu", marks=pytest.mark.gpu, id="gpu"),
                    pytest.param("cpu", marks=pytest.mark.cpu_engine, id="cpu")]


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
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if report.failed and ("vlcheck_error", True) in getattr(report, "user_properties", ()):
        return "error", "E", ("VLCHECK ERROR", {"red": True})
    if report.failed and ("vlcheck_spec_error", True) in getattr(report, "user_properties", ()):
        return "failed", "F", ("FAILED", {"red": True})  # the user's spec is wrong: a failure, not a setup error
    return None


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    errors = [r for r in terminalreporter.stats.get("error", []) if ("vlcheck_error", True) in getattr(r, "user_properties", ())]
    if errors:
        terminalreporter.section("vlcheck errors: the suite's own code crashed (not a vLLM finding)", red=True)
        for r in errors:
            first = str(r.longrepr).strip().splitlines()
            terminalreporter.line(f"{r.nodeid}: {next((l for l in first if 'Error' in l), first[-1] if first else '')[:200]}")


ENGINE_FIXTURES = ("engine", "engine_cache_off", "seeded_engine", "tp_ready_engine")
"""The fixtures below, each serving a family-config from its own engine."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run grouped by family-config, and within it by the engine they need (shared,
    cache off, seeded float32, tensor-parallel), so each engine starts once and serves all of its
    tests: the cache holds one engine, and going back to one would start it again.
    With --vlcheck-shard, the tests that belong to no family run in shard 1 only."""
    def key(item: pytest.Item):
        callspec = getattr(item, "callspec", None)
        family = callspec.params.get("family") if callspec else None
        variant = callspec.params.get("variant") if callspec else None
        return (getattr(family, "name", ""), getattr(variant, "kind", ""))

    shard = config.getoption("--vlcheck-shard")
    if shard is not None and shard.index != 1:
        familyless = [i for i in items if key(i)[0] == ""]
        if familyless:
            config.hook.pytest_deselected(items=familyless)
            items[:] = [i for i in items if key(i)[0] != ""]
    def engine(item: pytest.Item) -> int:
        return next((n for n, name in enumerate(ENGINE_FIXTURES) if name in getattr(item, "fixturenames", ())),
                    len(ENGINE_FIXTURES))

    def on_engine(item: pytest.Item) -> bool:
        return item.get_closest_marker("gpu") is not None or item.get_closest_marker("cpu_engine") is not None

    live = [i for i in items if on_engine(i)]
    if live:
        rest = [i for i in items if not on_engine(i)]
        items[:] = rest + sorted(live, key=lambda i: (*key(i), engine(i)))


@pytest.fixture(scope="session")
def engines():
    """The GPU tier's engine cache: one live vLLM engine at a time."""
    from vlcheck.gpu.engines import EngineCache

    cache = EngineCache()
    yield cache
    cache.close()


@pytest.fixture
def engine_platform() -> str:
    """`gpu`, or `cpu` (vLLM's CPU build) for a test marked `engine` parametrized over both."""
    return "gpu"


@pytest.fixture(scope="session")
def weights_mode(pytestconfig) -> str:
    return pytestconfig.getoption("--vlcheck-weights")


def start_engine(family, variant, engines, weights_mode, request, dtypes=(None,), platform="gpu", **overrides):
    """The family-config's engine: skipped when the runner cannot host it (GPUs, weights),
    failed when it does not start (that family's tests only). A declared `generation`
    deviation (an engine known not to start or serve) turns the failure into a strict xfail.
    `dtypes`: tried in order until one starts (None: the spec's own), recorded as `dtype`."""
    from vlcheck.gpu.engines import EngineUnavailable, platform_unavailable
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
    for dtype in dtypes:
        try:
            handle = engines.get(family, variant, weights_mode, platform, **overrides, **({"dtype": dtype} if dtype else {}))
        except EngineUnavailable as err:
            if err.skip:
                pytest.skip(str(err))
            errors.append(f"{dtype}: {err}" if dtype else str(err))
            continue
        if dtype:
            request.node.user_properties.append(("dtype", dtype))
        return handle
    # The mark applied above cannot turn a failed fixture setup into an xfail (pytest evaluates
    # xfail marks before fixtures run): a declared failure to start is made one here.
    if variant.deviation("generation") is not None:
        pytest.xfail(f"declared deviation: {variant.deviation('generation')} ({'; '.join(errors)})")
    pytest.fail("\n".join(errors), pytrace=False)


@pytest.fixture
def engine(family, variant, engines, weights_mode, engine_platform, request):
    return start_engine(family, variant, engines, weights_mode, request, platform=engine_platform)


@pytest.fixture
def tp_ready_engine(family, variant, engines, request):
    """`tp_ready_engine(size)`: the family-config's tensor-parallel-ready synthetic checkpoint with
    seeded weights, served at tensor_parallel_size `size` (vlcheck/gpu/tensor_parallel.py)."""
    from vlcheck.gpu.tensor_parallel import TP_READY_HEADS

    def at(size: int):
        return start_engine(family, variant, engines, "seeded", request, heads=TP_READY_HEADS, tensor_parallel_size=size)

    return at


@pytest.fixture
def seeded_engine(family, variant, engines, engine_platform, request):
    """(engine, dtype): the family-config's seeded checkpoint served in float32, as transformers
    ran the CPU reference (on GPUs its own engine: the shared one runs the spec's dtype; on the CPU
    build the shared one), or in bfloat16 where vLLM refuses float32
    (tests/gpu_generation/test_vllm_vs_transformers.py)."""
    handle = start_engine(family, variant, engines, "seeded", request, dtypes=("float32", "bfloat16"),
                          platform=engine_platform)
    return handle, dict(request.node.user_properties)["dtype"]


@pytest.fixture
def engine_cache_off(family, variant, engines, weights_mode, engine_platform, request):
    """The same family-config with the processor cache disabled: a second engine, so only with
    --vlcheck-cache-off."""
    if not request.config.getoption("--vlcheck-cache-off"):
        pytest.skip("needs --vlcheck-cache-off (starts a second engine per family)")
    return start_engine(family, variant, engines, weights_mode, request, platform=engine_platform,
                        mm_processor_cache_gb=0)


@pytest.fixture(scope="session")
def api_servers():
    """One live API server at a time (tests/served_engine/): (family, kind, platform) -> (server, template)."""
    live: dict = {}
    yield live
    for server, _ in live.values():
        server.stop()


@pytest.fixture
def api_server(family, variant, engine_platform, engine, api_servers, request):
    """(server, chat template): vLLM's API server for this family-config with the offline engine's
    args (`engine`, started first, is its reference), or a skip saying why."""
    from vlcheck.gpu import api_server as api
    from vlcheck.gpu.engines import engine_args
    from vlcheck.prompt.templates import TemplateUnavailable, resolve

    wanted = request.config.getoption("--vlcheck-serve")
    if not {"all", family.name, config_id(family, variant)} & set(wanted):
        pytest.skip("the API server is a second engine per family-config: select with --vlcheck-serve "
                    f"{config_id(family, variant)} (or {family.name}, or all)")
    key = (family.name, variant.kind, engine_platform)
    if key not in api_servers:
        for server, _ in api_servers.values():
            server.stop()
        api_servers.clear()
        try:
            template = resolve(variant).text
        except TemplateUnavailable as err:
            pytest.skip(f"{family.name}: the server needs the model's chat template: {err}")
        args, _, _ = engine_args(family, variant, engine.weights if engine.weights != "synthetic-dummy" else "synthetic",
                                 platform=engine_platform)
        try:
            api_servers[key] = (api.start(engine_platform, args, template), template)
        except api.ServerFailed as err:
            pytest.fail(f"{family.name}: {err}", pytrace=False)
    return api_servers[key]


@pytest.fixture
def family_snapshot(snapshot):
    """A syrupy snapshot stored as `snapshots/<test file>/<family>.txt`."""
    return snapshot.use_extension(FamilySnapshot)
