"""The catalogue: every per-family check of vlcheck, defined once, run by `vlcheck check` (one
report cell per family and check) and by pytest (one test per family-config).

A check is one `Check` entry of `CATALOGUE`:

    Check(name="fingerprints",                 # the report's column (and `deviations.<name>` in specs)
          run=fingerprints_check,              # (FamilySpec, Variant[, engine]) -> CheckResult, one family-config
          test="tests/numerics/test_fingerprints.py::test_processor_fingerprints",
          informational=(),                    # facts recorded but not compared (timings, which weights)
          tolerance=None,                      # numbers in its facts this close are the same (logprobs)
          engine=False)                        # True: run(spec, variant, engine) on the GPU tier

The contract of `run`, for one family-config (a family's `single` or `multi_image` example):
- It returns a `CheckResult`: `pass`; `fail` when vLLM or transformers behaves otherwise; `skip`
  with the reason when it cannot run here. It never catches an exception broadly: where vLLM may
  reject something, `core.results.from_exception` makes the cell `fail` when vLLM or transformers
  raised it and `error` when vlcheck's own code did. An exception that escapes `run` is an `error`.
- Its `data` holds the measured facts, keyed `"<variant>.<fact>"` (`single.token_counts`), JSON
  values. `vlcheck diff` and `pytest --vlcheck-baseline` compare every fact not named in
  `informational`, generically by name: a list of strings line by line, a dict key by key (a key
  measured on one side only is coverage lost), anything else by value (numbers within `tolerance`). A fact that could not be
  measured is absent, never empty. Put what a snapshot would hold into a fact: a fact is what the
  gate can see.
- Declarations are applied here, not in `run`: a failure the variant declares under
  `deviations.<name>` (or `declared_as`) becomes a declared deviation (`core.results.declared_deviation`).
- `test` names the pytest test that runs the same function per family-config through
  `runners.testing.run_check`, which compares with `--vlcheck-baseline FILE` when given.

Adding a check: its function in the lowest layer that has what it needs, its name in
`spec/schema.py`'s `CHECKS`, one `Check` here, and its test (`tests/package/test_catalogue.py`
holds every entry to that).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from vlcheck.core.results import (CheckResult, Status, combine, crashed, declared_deviation)
from vlcheck.spec.schema import MODALITIES, VISUAL, FamilySpec, Variant, not_sent


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[..., CheckResult]
    """(spec, variant) -> CheckResult; with `engine`, (spec, variant, engine handle)."""
    test: str
    """The pytest test (`path::name`) that runs `run` once per family-config."""
    informational: tuple[str, ...] = ()
    """Facts (without the variant prefix) recorded for people but never compared: timings, weights."""
    engine: bool = False
    """Needs a live vLLM engine (the GPU tier): `run(spec, variant, handle)`."""
    declared_as: str | None = None
    """The `deviations.<key>` that applies to it, when not its own name (fingerprints: processor)."""
    per_family: Callable[[FamilySpec], CheckResult] | None = None
    """A check of the whole family instead of one family-config (`spec`)."""
    tolerance: float | None = None
    """Numbers in its facts that differ by at most this much are the same (logprobs: float sums
    in another order); None: exact."""
    engine_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    """With `engine`: what its engine is started with over the test engine's args (a configuration's)."""
    modalities: tuple[str, ...] = VISUAL
    """The modalities its run sends: a family-config taking none of them (an `audio` example, for a
    check that sends images and video) is a skip saying so, never run."""


def run_variant(check: Check, spec: FamilySpec, variant: Variant, engine=None) -> CheckResult:
    """One family-config's result, read against the variant's declarations. An exception escaping
    the check is vlcheck's crash: `error`, never `fail`."""
    why_not = not_sent(check.modalities, variant)
    if why_not:
        return CheckResult(spec.name, check.name, Status.SKIP, f"[{variant.kind}] {why_not}")
    try:
        result = check.run(spec, variant, engine) if check.engine else check.run(spec, variant)
    except Exception as err:  # noqa: BLE001 - an escaped exception is by contract vlcheck's: error
        return crashed(spec.name, check.name, err, f"[{variant.kind}]")
    if check.declared_as:
        result = declared_deviation(result, variant, declared_as=check.declared_as)
    return declared_deviation(result, variant)


def run_family_config(check: Check, spec: FamilySpec, variant: Variant, store=None, key: str | None = None) -> CheckResult:
    """`run_variant` through the result store when one is given (the cell's `key`, computed here if
    not given): what `vlcheck check` and the pytest tier share."""
    if store is None:
        return run_variant(check, spec, variant)
    return store.variant(key or store.key(check, spec), variant.kind, lambda: run_variant(check, spec, variant))


def run_cell(check: Check, spec: FamilySpec, store=None) -> CheckResult:
    """The report cell: every family-config of the family, combined (the worst status wins).
    `store` (`gate.store.ResultStore`): a CPU check's family-configs measured before (by this
    command or the pytest tier) are taken from it, the others measured and stored."""
    if check.per_family is not None:
        try:
            return check.per_family(spec)
        except Exception as err:  # noqa: BLE001 - as in run_variant
            return crashed(spec.name, check.name, err)
    if check.engine:  # its cells are the engine tier's tests' (runners/engine_run.py), never measured here
        raise ValueError(f"{check.name}: an engine check runs in the engine tier (vlcheck check --gpu / --cpu-engine)")
    key = store.key(check, spec) if store is not None else None
    results = {variant.kind: run_family_config(check, spec, variant, store, key) for variant in spec.variants}
    cell = combine(spec.name, check.name, list(results.values()))
    cell.variants = {kind: unit(r) for kind, r in results.items()}
    return cell


def unit(result: CheckResult) -> dict[str, Any]:
    """One family-config's part of a report cell; `frames` (where an exception was raised) only
    when it has them: evidence for the reader, never compared (`gate.diff` compares status and finding)."""
    out: dict[str, Any] = {"status": result.status.value, "reason": result.reason, "finding": result.finding}
    if result.frames:
        out["frames"] = [dict(f) for f in result.frames]
    return out


# --- the CPU checks ---------------------------------------------------------------------------

def check_spec(spec: FamilySpec) -> CheckResult:
    """The spec loaded (it did, to get here) and agrees with its example in the seed files; skips,
    saying where it looked, when no seed can be executed here."""
    from vlcheck.examples import seeds
    from vlcheck.examples.seed_check import compare
    from vlcheck.prompt.snapshots import prompt_document

    facts = {"prompts": prompt_document(spec).splitlines()}
    problems, checked, missing = [], 0, []
    if all(v.source is None for v in spec.variants):
        return CheckResult(spec.name, "spec", Status.PASS, "loaded; your own model: no vLLM example to compare with"
                           + (f" (based on {spec.base})" if spec.base else ""), data=facts)
    for variant in spec.variants:
        if variant.source is None:
            continue
        if seeds.load_seed(variant.source.seed) is None:
            missing.append(f"[{variant.kind}] seed {variant.source.seed} "
                           + ("cannot be executed" if seeds.seed_file(variant.source.seed) else "not found"))
            continue
        problems += compare(spec, variant)
        checked += 1
    if problems:
        return CheckResult(spec.name, "spec", Status.FAIL, problems[0], problems, facts)
    if not checked:
        return CheckResult(spec.name, "spec", Status.SKIP,
                           f"loaded, but not compared with its example: {'; '.join(missing)} in {seeds.seeds_dir()} "
                           f"(set {seeds.SEEDS_ENV})", data=facts)
    return CheckResult(spec.name, "spec", Status.PASS, "loaded; matches the example", data=facts)


def _call(where: str, spec: FamilySpec, variant: Variant) -> CheckResult:
    """Run the check function at `module:function`, imported when first run: vLLM and transformers
    load only when a check needs them."""
    import importlib

    module, _, function = where.partition(":")
    return getattr(importlib.import_module(module), function)(spec, variant)


def _lazy(where: str) -> Callable[[FamilySpec, Variant], CheckResult]:
    # a partial of a module-level function, not a closure: `vlcheck check -j` pickles the checks
    return functools.partial(_call, where)


def code_of(fn: Callable) -> tuple[str, str]:
    """(module, function) of the code a check's function runs: a lazily named check's target
    (`_lazy`), else the function itself (a partial's)."""
    if isinstance(fn, functools.partial) and fn.func is _call:
        module, _, name = fn.args[0].partition(":")
        return module, name
    fn = getattr(fn, "func", fn)
    return fn.__module__, fn.__name__


CATALOGUE: dict[str, Check] = {c.name: c for c in (
    Check("spec", None, "tests/prompt_format/test_specs_match_seeds.py::test_spec_matches_example",
          per_family=check_spec),
    Check("engine_args", _lazy("vlcheck.cpu.vllm_checks:engine_args_check"), "tests/vllm_cpu/test_engine_args.py::test_engine_args_are_accepted",
          modalities=MODALITIES),
    Check("architecture", _lazy("vlcheck.cpu.vllm_checks:architecture_check"), "tests/vllm_cpu/test_architecture.py::test_architecture_is_served",
          modalities=MODALITIES),
    Check("template", _lazy("vlcheck.prompt.conformance:template_conformance"), "tests/prompt_format/test_hub_conformance.py::test_hand_prompt_matches_chat_template",
          modalities=MODALITIES),
    Check("stops", _lazy("vlcheck.prompt.conformance:stop_conformance"), "tests/prompt_format/test_hub_conformance.py::test_stop_tokens_resolve",
          modalities=MODALITIES),
    Check("processor", _lazy("vlcheck.cpu.processor_check:processor_check"), "tests/vllm_cpu/test_processor.py::test_processor_expands_every_item",
          modalities=MODALITIES),
    Check("fingerprints", _lazy("vlcheck.numerics.fingerprint:fingerprints_check"), "tests/numerics/test_fingerprints.py::test_processor_fingerprints",
          declared_as="processor", modalities=MODALITIES),
    Check("placement", _lazy("vlcheck.hostile.placement:placement_check"), "tests/numerics/test_placement.py::test_features_land_where_the_template_put_them",
          modalities=MODALITIES),
    Check("tiling", _lazy("vlcheck.cpu.tiling:tiling_check"), "tests/vllm_cpu/test_tiling.py::test_images_that_tile_take_every_path_alike"),
    Check("confusable", _lazy("vlcheck.gate.confusable:confusable_check"),
          "tests/vllm_cpu/test_confusable.py::test_the_checks_hold_on_a_build_that_tells_fields_apart"),
    Check("hostile", _lazy("vlcheck.hostile.inputs:hostile_check"), "tests/hostile_inputs/test_hostile_cpu.py::test_hostile_inputs_on_cpu",
          modalities=MODALITIES),
    Check("reference", _lazy("vlcheck.numerics.reference:reference_check"), "tests/numerics/test_cpu_reference.py::test_transformers_reference",
          tolerance=1e-3,
          modalities=MODALITIES),
    Check("served", _lazy("vlcheck.served.checks:served_check"), "tests/served/test_served.py::test_served_render",
          informational=("served_document", "served_bad_request_lines"),
          modalities=MODALITIES),
    Check("video_loaders", _lazy("vlcheck.cpu.video_loaders:video_loaders_check"),
          "tests/vllm_cpu/test_video_loaders.py::test_video_loaders_decode_the_files_truth"),
)}
"""Every check that runs without an engine, in report order (`vlcheck check`)."""

CPU_CHECKS = CATALOGUE  # the name the report and older callers use


def cpu_checks(names: Iterable[str] | None = None) -> dict[str, Check]:
    """The CPU checks, or those named (in catalogue order)."""
    if names is None:
        return dict(CATALOGUE)
    wanted = set(names)
    return {n: c for n, c in CATALOGUE.items() if n in wanted}


def unloadable(name: str, error: Exception, checks: Iterable[str]) -> list[CheckResult]:
    """The cells of a family whose spec file does not load: `spec` fails with the loader's message
    (the user's spec is wrong, not vlcheck), every other check is skipped for it."""
    return [CheckResult(name, check, Status.FAIL, f"the spec does not load: {error}") if check == "spec" else
            CheckResult(name, check, Status.SKIP, "the spec does not load") for check in checks]


def run_checks(families: Iterable[FamilySpec], checks: dict[str, Check],
               progress: Callable[[str, str], None] | None = None, jobs: int = 1, store=None,
               ahead: Callable[[list[FamilySpec], str], None] | None = None,
               seconds: dict[tuple[str, str], float] | None = None,
               in_a_worker: dict[str, Callable[[], Any]] | None = None,
               from_a_worker: dict[str, Any] | None = None) -> list[CheckResult]:
    """Every check on every family (one cell each), in family order. `jobs` > 1 runs families in
    that many worker processes. `store`
    (`gate.store.ResultStore`): a cell whose inputs hash as a stored one is reused, not measured,
    and every measured cell is stored. `ahead(families, check)`: called with the families that will
    measure `check` before any is measured (the served check starts their render servers side by side).
    `in_a_worker`: name -> a picklable function run first in a worker, where there are workers (it
    finds vLLM imported there at no extra cost), its value put in `from_a_worker`; absent there
    where the run had no workers."""
    families = list(families)
    keys: dict[tuple[str, str], str] = {}
    done: dict[tuple[str, str], CheckResult] = {}
    if store is not None:
        for spec in families:
            for name, check in checks.items():
                keys[spec.name, name] = key = store.key(check, spec)
                found = store.get(key)
                if found is not None:
                    done[spec.name, name] = found
                    if progress:
                        progress(spec.name, name)
    todo = {spec.name: {n: c for n, c in checks.items() if (spec.name, n) not in done} for spec in families}
    pending = [spec for spec in families if todo[spec.name]]
    if ahead is not None:
        for name in checks:
            needing = [spec for spec in pending if name in todo[spec.name]]
            if needing:
                ahead(needing, name)
    if jobs > 1 and len(pending) > 1:
        measured = _in_workers(pending, todo, progress, jobs, store, in_a_worker or {}, from_a_worker)
    else:
        measured = []
        for spec in pending:
            for name, check in todo[spec.name].items():
                if progress:
                    progress(spec.name, name)
                measured.append(_timed(check, spec, store))
    if store is not None:
        store.reused_variants = sum(store.variants_from_before(keys[r.family, r.check], list(r.variants))
                                    for r, _ in measured)
    for result, took in measured:
        if seconds is not None:
            seconds[result.family, result.check] = took
        done[result.family, result.check] = result
        if store is not None:
            store.put(keys[result.family, result.check], result)
    return [done[spec.name, name] for spec in families for name in checks]


def _timed(check: Check, spec: FamilySpec, store=None) -> tuple[CheckResult, float]:
    import time

    began = time.monotonic()
    return run_cell(check, spec, store), time.monotonic() - began


def _family_cells(spec: FamilySpec, checks: dict[str, Check], store=None) -> list[tuple[CheckResult, float]]:
    return [_timed(check, spec, store=store) for check in checks.values()]


def _in_workers(families: list[FamilySpec], checks: dict[str, dict[str, Check]], progress,
                jobs: int, store=None, side: dict[str, Callable[[], Any]] | None = None,
                side_values: dict[str, Any] | None = None) -> list[tuple[CheckResult, float]]:
    """`checks`: family -> the checks to run on it. Each worker holds a copy of `store`: the files are shared."""
    import contextlib
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # each worker runs one family at a time: torch's own thread pool in each would only contend
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    by_family: dict[str, list[tuple[CheckResult, float]]] = {}
    serving = contextlib.nullcontext()
    if any("served" in todo for todo in checks.values()):
        from vlcheck.served.shared_fork_server import sharing

        serving = sharing()
    with serving, ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        asides = {name: pool.submit(fn) for name, fn in (side or {}).items()}
        futures = {pool.submit(_family_cells, spec, checks[spec.name], store): spec for spec in families}
        if side_values is not None:
            side_values.update({name: future.result() for name, future in asides.items()})
        for future in as_completed(futures):
            spec = futures[future]
            by_family[spec.name] = future.result()
            if progress:
                for name in checks[spec.name]:
                    progress(spec.name, name)
    return [r for spec in families for r in by_family[spec.name]]


# --- the engine checks' cells that are no single test's (a live engine per family-config) ------------
# Every engine test is a check of its own (runners/engine_cells.py); these two build a richer cell:
# the `cpu_engine` facts that `vlcheck diff` compares between the ends of an upgrade, and each
# configuration's, with the proof that its path ran.

def _cpu_engine(spec: FamilySpec, variant: Variant, handle) -> CheckResult:
    from vlcheck.numerics.engine_check import engine_check

    return engine_check(spec, variant, handle)


def _engine_informational() -> tuple[str, ...]:
    from vlcheck.numerics.engine_check import INFORMATIONAL

    return INFORMATIONAL


CPU_ENGINE_CATALOGUE: dict[str, Check] = {c.name: c for c in (
    Check("cpu_engine", _cpu_engine, "vlcheck/runners/tier/engine/test_engine_facts.py::test_engine_facts_as_reported",
          informational=_engine_informational(), engine=True,
          modalities=MODALITIES),
)}
"""The engine tier on vLLM's CPU build as one cell (`vlcheck check --cpu-engine`): generation, goldens,
vLLM against transformers, input sensitivity and cache hits on one float32 engine per family-config,
whose facts `vlcheck diff` compares between the two ends of an upgrade (numerics/engine_check.py)."""


def configuration_check(config, platform: str) -> Check:
    """A configuration's cell (vlcheck/configurations/): `cpu_engine.<name>` on the CPU build,
    `engine.<name>` on GPUs."""
    from vlcheck.configurations.checks import engine_overrides, run
    from vlcheck.configurations.outcome import INFORMATIONAL

    return Check(config.check_name(platform), functools.partial(run, config),
                 "vlcheck/runners/tier/engine/test_configurations.py::test_configuration", informational=INFORMATIONAL,
                 engine=True, engine_overrides=engine_overrides(config, platform), modalities=MODALITIES)


def configuration_checks(names: list[str], platform: str) -> dict[str, Check]:
    """`--config` values -> their checks (eager is the engine cell itself: none of its own)."""
    from vlcheck.configurations.registry import select

    chosen = [c for c in select(names, platform) if not c.is_default] if names else []
    return {c.check_name(platform): configuration_check(c, platform) for c in chosen}


def engine_check_named(name: str) -> Check:
    """The engine tier's check of a report column: `cpu_engine`, or a configuration's."""
    from vlcheck.configurations.registry import CONFIGURATIONS, from_serve_line

    if name in CPU_ENGINE_CATALOGUE:
        return CPU_ENGINE_CATALOGUE[name]
    platform, _, config = name.partition(".")
    if config.startswith("serve["):
        return configuration_check(from_serve_line(config[len("serve["):-1]), "cpu" if platform == "cpu_engine" else "gpu")
    return configuration_check(CONFIGURATIONS[config], "cpu" if platform == "cpu_engine" else "gpu")


def informational_facts(checks: dict[str, Check]) -> dict[str, list[str]]:
    """Per check, the facts `vlcheck diff` does not compare: written into the report."""
    return {name: list(c.informational) for name, c in checks.items() if c.informational}


def tolerances(checks: dict[str, Check]) -> dict[str, float]:
    """Per check, how far its facts' numbers may move and be the same: written into the report."""
    return {name: c.tolerance for name, c in checks.items() if c.tolerance is not None}
