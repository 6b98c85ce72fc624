"""pytest configuration shared by every tier: options, the family list, snapshot fixtures.

The tiers are selected by marker: `pytest -m "not gpu"` (CPU, what CI runs) and `pytest -m gpu`.
"""

from __future__ import annotations

import pytest

from vlcheck.registry import all_families
from vlcheck.snapshots import FamilySnapshot
from vlcheck.testing import config_id, expect_deviation


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlcheck")
    group.addoption("--vlcheck-family", action="append", default=[], metavar="NAME",
                    help="only check these families (repeatable); default: all specs")
    group.addoption("--vlcheck-variant", choices=("single", "multi_image"), default=None,
                    help="only this example of each family (the GPU runner uses one process per family-config)")
    group.addoption("--vlcheck-weights", choices=("auto", "real", "synthetic", "seeded"), default="auto",
                    help="GPU tier: real checkpoints (HF cache / Hub), synthetic ones, or real where available")
    group.addoption("--vlcheck-update-goldens", action="store_true",
                    help="GPU tier: record greedy goldens instead of comparing with them")
    group.addoption("--vlcheck-cache-off", action="store_true",
                    help="GPU tier: also check each family with the processor cache disabled (a second engine each)")


def selected_families(config: pytest.Config) -> list[str]:
    names = list(all_families())
    wanted = config.getoption("--vlcheck-family")
    if wanted:
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise pytest.UsageError(f"--vlcheck-family: unknown family {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `family` runs once per selected family spec (id: the name); one that
    also takes `variant` runs once per example of it (id: `name-single`, `name-multi_image`)."""
    if "family" not in metafunc.fixturenames:
        return
    families = [all_families()[n] for n in selected_families(metafunc.config)]
    if "variant" in metafunc.fixturenames:
        only = metafunc.config.getoption("--vlcheck-variant")
        pairs = [(f, v) for f in families for v in f.variants if only in (None, v.kind)]
        metafunc.parametrize(("family", "variant"), pairs, ids=[config_id(f, v) for f, v in pairs])
    else:
        metafunc.parametrize("family", families, ids=[f.name for f in families])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run grouped by family-config, so each engine starts once and serves all of them."""
    def key(item: pytest.Item):
        callspec = getattr(item, "callspec", None)
        family = callspec.params.get("family") if callspec else None
        variant = callspec.params.get("variant") if callspec else None
        return (getattr(family, "name", ""), getattr(variant, "kind", ""))

    gpu = [i for i in items if i.get_closest_marker("gpu")]
    if gpu:
        rest = [i for i in items if not i.get_closest_marker("gpu")]
        items[:] = rest + sorted(gpu, key=key)


@pytest.fixture(scope="session")
def engines():
    """The GPU tier's engine cache: one live vLLM engine at a time."""
    from vlcheck.engines import EngineCache

    cache = EngineCache()
    yield cache
    cache.close()


@pytest.fixture(scope="session")
def weights_mode(pytestconfig) -> str:
    return pytestconfig.getoption("--vlcheck-weights")


def start_engine(family, variant, engines, weights_mode, request, **overrides):
    """The family-config's engine: skipped when the runner cannot host it (GPUs, weights),
    failed when it does not start (that family's tests only). A declared `generation`
    deviation (an engine known not to start or serve) turns the failure into a strict xfail."""
    from vlcheck.engines import EngineUnavailable
    from vlcheck.requests import example_prompts
    from vlcheck.templates import TemplateUnavailable

    try:  # before starting an engine: can the example's prompts be made at all?
        for modality in variant.modalities:
            example_prompts(family, variant, modality)
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")
    expect_deviation(request, variant, "generation")
    try:
        return engines.get(family, variant, weights_mode, **overrides)
    except EngineUnavailable as err:
        if err.skip:
            pytest.skip(str(err))
        if "generation" in variant.deviations:
            pytest.xfail(f"declared deviation: {variant.deviations['generation']} ({err})")
        pytest.fail(str(err), pytrace=False)


@pytest.fixture
def engine(family, variant, engines, weights_mode, request):
    return start_engine(family, variant, engines, weights_mode, request)


@pytest.fixture
def engine_cache_off(family, variant, engines, weights_mode, request):
    """The same family-config with the processor cache disabled: a second engine, so only with
    --vlcheck-cache-off."""
    if not request.config.getoption("--vlcheck-cache-off"):
        pytest.skip("needs --vlcheck-cache-off (starts a second engine per family)")
    return start_engine(family, variant, engines, weights_mode, request, mm_processor_cache_gb=0)


@pytest.fixture
def family_snapshot(snapshot):
    """A syrupy snapshot stored as `snapshots/<test file>/<family>.txt`."""
    return snapshot.use_extension(FamilySnapshot)
