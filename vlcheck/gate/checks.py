"""The catalogue of per-family checks, run by `vlcheck check` and shown in its report.

Each check takes a family spec and returns one `CheckResult` (variants combined). The pytest
tests run the same functions per variant; this module is the command-line view of them.
"""

from __future__ import annotations

from typing import Callable, Iterable

from vlcheck.core.results import CheckResult, Status, combine, crashed, declared_deviation
from vlcheck.spec.schema import FamilySpec

Check = Callable[[FamilySpec], CheckResult]


def per_variant(spec: FamilySpec, check: str, run: Callable) -> CheckResult:
    """One cell from the check's result on each variant, each read against the variant's
    declarations for the installed versions."""
    return combine(spec.name, check, [declared_deviation(run(spec, v), v) for v in spec.variants])


def check_spec(spec: FamilySpec) -> CheckResult:
    """The spec loaded (it did, to get here) and agrees with its example in the seed files."""
    from vlcheck.examples import seeds
    from vlcheck.examples.seed_check import compare
    from vlcheck.prompt.snapshots import prompt_document

    facts = {"prompts": prompt_document(spec).splitlines()}
    problems, checked = [], 0
    for variant in spec.variants:
        if seeds.load_seed(variant.source.seed) is None:
            continue
        problems += compare(spec, variant)
        checked += 1
    if problems:
        return CheckResult(spec.name, "spec", Status.FAIL, problems[0], problems, facts)
    if not checked:
        return CheckResult(spec.name, "spec", Status.PASS, f"loaded; its seed is not runnable here ({seeds.seeds_dir()})",
                           data=facts)
    return CheckResult(spec.name, "spec", Status.PASS, "loaded; matches the example", data=facts)


def check_template(spec: FamilySpec) -> CheckResult:
    from vlcheck.prompt.conformance import template_conformance

    return per_variant(spec, "template", template_conformance)


def check_stops(spec: FamilySpec) -> CheckResult:
    from vlcheck.prompt.conformance import stop_conformance

    return per_variant(spec, "stops", stop_conformance)


def check_engine_args(spec: FamilySpec) -> CheckResult:
    from vlcheck.cpu.vllm_checks import engine_args_check

    return per_variant(spec, "engine_args", engine_args_check)


def check_architecture(spec: FamilySpec) -> CheckResult:
    from vlcheck.cpu.vllm_checks import architecture_check

    return per_variant(spec, "architecture", architecture_check)


def check_processor(spec: FamilySpec) -> CheckResult:
    from vlcheck.cpu.processor_check import processor_check

    return per_variant(spec, "processor", processor_check)


def check_served(spec: FamilySpec) -> CheckResult:
    from vlcheck.served.checks import served_check

    return per_variant(spec, "served", served_check)


CPU_CHECKS: dict[str, Check] = {
    "spec": check_spec,
    "engine_args": check_engine_args,
    "architecture": check_architecture,
    "template": check_template,
    "stops": check_stops,
    "processor": check_processor,
    "served": check_served,
}


def unloadable(name: str, error: Exception, checks: Iterable[str]) -> list[CheckResult]:
    """The cells of a family whose spec file does not load: `spec` fails with the loader's message
    (the user's spec is wrong, not vlcheck), every other check is skipped for it."""
    return [CheckResult(name, check, Status.FAIL, f"the spec does not load: {error}") if check == "spec" else
            CheckResult(name, check, Status.SKIP, "the spec does not load") for check in checks]


def run_checks(families: Iterable[FamilySpec], checks: dict[str, Check],
               progress: Callable[[str, str], None] | None = None) -> list[CheckResult]:
    """Every check on every family. A check that raises is a failure of that cell only."""
    results = []
    for spec in families:
        for name, check in checks.items():
            if progress:
                progress(spec.name, name)
            try:
                results.append(check(spec))
            except Exception as err:  # one broken cell must not hide the others
                results.append(crashed(spec.name, name, err))
    return results


def gpu_checks(weights: str) -> tuple[dict[str, Check], Callable[[], None]]:
    """The GPU tier as report checks (generation, cache), sharing one engine per family-config.
    Returns the checks and a function that frees the last engine."""
    from vlcheck.gpu import gpu_checks as g
    from vlcheck.gpu.engines import EngineCache, EngineUnavailable
    from vlcheck.prompt.templates import TemplateUnavailable

    engines = EngineCache()

    def per_variant(check: str, spec: FamilySpec, body) -> CheckResult:
        results = []
        for variant in spec.variants:
            try:
                handle = engines.get(spec, variant, weights)
                result = body(variant, handle)
            except EngineUnavailable as err:
                result = CheckResult(spec.name, check, Status.SKIP if err.skip else Status.FAIL, str(err))
                # an engine known not to start: every GPU check of the variant shares that deviation
                result = declared_deviation(result, variant, declared_as="generation")
            except TemplateUnavailable as err:
                result = CheckResult(spec.name, check, Status.SKIP, f"[{variant.kind}] {err}")
            except Exception as err:  # a request the engine rejected: this variant's cell fails
                result = CheckResult(spec.name, check, Status.FAIL, f"[{variant.kind}] {type(err).__name__}: {str(err)[:300]}")
            results.append(declared_deviation(result, variant))
        return combine(spec.name, check, results)

    def generation(spec: FamilySpec) -> CheckResult:
        def body(variant, handle):
            runs = g.generation_runs(spec, variant, handle)
            bad = [f"{r.shape}: engine {r.prompt_tokens} prompt tokens, CPU processor {r.expected_prompt_tokens}"
                   for r in runs if r.prompt_tokens != r.expected_prompt_tokens]
            data = {f"{variant.kind}.prompt_tokens": {r.shape: r.prompt_tokens for r in runs},
                    f"{variant.kind}.greedy_tokens": {r.shape: [o["token_ids"] for o in r.outputs] for r in runs},
                    f"{variant.kind}.engine_start_s": round(handle.start_seconds, 1), f"{variant.kind}.weights": handle.weights}
            stop = g.stop_run(spec, variant, handle)
            if stop is not None and (stop.finish_reason != "stop" or stop.stop_reason != stop.stop_id):
                bad.append(f"stop token {stop.stop_id} did not end generation ({stop.finish_reason}, {stop.stop_reason})")
            status = Status.FAIL if bad else Status.PASS
            return CheckResult(spec.name, "generation", status, f"[{variant.kind}] " + (bad[0] if bad else
                               f"{len(runs)} shape(s) generated; token counts match the processor"), bad, data)
        return per_variant("generation", spec, body)

    def cache(spec: FamilySpec) -> CheckResult:
        def body(variant, handle):
            run = g.uuid_resend(spec, variant, handle, "list", "report")
            none = g.uuid_resend(spec, variant, handle, "none", "report-none")
            error = g.unknown_uuid_error(spec, variant, handle)
            data = {f"{variant.kind}.resend_hits": run.hits_added,
                    f"{variant.kind}.none_form_queries": none.queries_added,
                    f"{variant.kind}.none_form_prompt_tokens": [none.first_prompt_tokens, none.resend_prompt_tokens]}
            bad = []
            if run.hits_added != g.NUM_PROMPTS or run.resend_prompt_tokens != run.first_prompt_tokens:
                bad.append(f"resend with [None] + uuids: {run.hits_added} hits for {g.NUM_PROMPTS} items, prompt tokens "
                           f"{run.first_prompt_tokens} -> {run.resend_prompt_tokens}")
            if error is None or "Cache miss" not in error:
                bad.append(f"unknown uuid with empty media: expected vLLM's cache-miss error, got {error!r}")
            note = (f"; the example's {{'image': None}} form is dropped ({none.queries_added:.0f} cache queries)"
                    if none.queries_added == 0 else "")
            return CheckResult(spec.name, "cache", Status.FAIL if bad else Status.PASS,
                               f"[{variant.kind}] " + (bad[0] if bad else f"{run.hits_added:.0f} hits on resend{note}"),
                               bad, data)
        return per_variant("cache", spec, body)

    return {"generation": generation, "cache": cache}, engines.close
