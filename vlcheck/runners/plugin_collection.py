"""The pytest plugin's collection: which families and family-configs a test runs for (its parameters),
shards, and the order that lets one engine per family-config serve all of its tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from vlcheck.configurations.registry import (
    CONFIGURATIONS,
    DEFAULT,
    UnknownConfiguration,
    select,
    unknown_places,
)
from vlcheck.runners.plugin_options import STARTED
from vlcheck.spec.registry import (
    SpecError,
    all_families,
    default_selection,
    spec_errors,
)
from vlcheck.spec.schema import VISUAL, config_id, not_sent


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
        sent = modalities_sent(metafunc)
        params = []
        for name in names:
            if name in broken:
                params.append(pytest.param(UnloadableSpec(name, broken[name]), None, id=f"{name}-spec"))
                continue
            params += [pytest.param(loaded[name], v, id=config_id(loaded[name], v), marks=_unless_sent(sent, name, v))
                       for v in loaded[name].variants if only in (None, v.kind)]
        metafunc.parametrize(("family", "variant"), params)
    else:
        metafunc.parametrize("family", [pytest.param(loaded[n] if n in loaded else UnloadableSpec(n, broken[n]), id=n)
                                        for n in names])
    if "configuration" in metafunc.fixturenames:  # after the family-config: ids read `cpu-qwen2_vl-single-chunked`
        metafunc.parametrize("configuration", configuration_params(metafunc.config))


def modalities_sent(metafunc: pytest.Metafunc) -> tuple[str, ...]:
    """What a family-config test sends: its `sends` marker's, else its check's (the test a `Check` of the
    catalogue, the CPU engine cell or a configuration's cell names), else image and video."""
    from vlcheck.gate.checks import CATALOGUE, CPU_ENGINE_CATALOGUE, configuration_check

    marker = metafunc.definition.get_closest_marker("sends")
    if marker is not None:
        return tuple(marker.args)
    path, _, name = metafunc.definition.nodeid.partition("::")
    a_configuration = configuration_check(CONFIGURATIONS[DEFAULT], "cpu")  # every configuration's cell sends alike
    for check in (*CATALOGUE.values(), *CPU_ENGINE_CATALOGUE.values(), a_configuration):
        test_path, _, test_name = check.test.partition("::")
        if test_name == name.split("[", 1)[0] and Path(test_path).name == Path(path).name:
            return check.modalities
    return VISUAL


def _unless_sent(sent: tuple[str, ...], family: str, variant) -> list:
    why = not_sent(sent, variant)
    return [pytest.mark.skip(reason=f"{family} [{variant.kind}]: {why}")] if why else []


NO_CONFIGURATION = ("no engine configuration selected: --vlcheck-config NAME (repeatable) or all; NAME one of "
                    + ", ".join(c for c in CONFIGURATIONS if c != DEFAULT) + ", or serve:FLAGS")


def configuration_params(config: pytest.Config) -> list:
    """The configurations selected with --vlcheck-config but eager (whose tests are the engine
    tier itself); none selected: one `none` that skips saying how to select them."""
    wanted = config.getoption("--vlcheck-config") + tensor_parallel_configurations(config)
    try:
        chosen = {c.name: c for c in select(wanted, "cpu") + select(wanted, "gpu")} if wanted else {}
    except UnknownConfiguration as err:
        raise pytest.UsageError(f"--vlcheck-config: {err}") from None
    unknown = unknown_places(chosen.values())
    if unknown:
        raise pytest.UsageError(f"--vlcheck-config {unknown}")
    params = [pytest.param(c, id=c.name) for c in chosen.values() if c.name != DEFAULT]
    return params or [pytest.param(None, id="none")]


def tensor_parallel_configurations(config: pytest.Config) -> list[str]:
    """`--vlcheck-tp N`: the `tpN` configuration (TP=N against TP=1 on the TP-ready checkpoint)."""
    size = config.getoption("--vlcheck-tp")
    if size is None:
        return []
    if f"tp{size}" not in CONFIGURATIONS:
        sizes = ", ".join(c[2:] for c in CONFIGURATIONS if c.startswith("tp") and c[2:].isdigit())
        raise pytest.UsageError(f"--vlcheck-tp {size}: no tp{size} configuration (sizes: {sizes})")
    return [f"tp{size}"]


ENGINE_FIXTURES = ("engine", "seeded_engine", "engine_cache_off", "configured_engine")
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
