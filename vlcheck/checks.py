"""The catalogue of per-family checks, run by `vlcheck check` and shown in its report.

Each check takes a family spec and returns one `CheckResult` (variants combined). The pytest
tests run the same functions per variant; this module is the command-line view of them.
"""

from __future__ import annotations

from typing import Callable, Iterable

from vlcheck.results import CheckResult, Status, combine
from vlcheck.spec import FamilySpec

Check = Callable[[FamilySpec], CheckResult]


def check_spec(spec: FamilySpec) -> CheckResult:
    """The spec loaded (it did, to get here) and agrees with its example in the seed files."""
    from vlcheck import seeds
    from vlcheck.seed_check import compare

    problems, checked = [], 0
    for variant in spec.variants:
        if seeds.load_seed(variant.source.seed) is None:
            continue
        problems += compare(spec, variant)
        checked += 1
    if problems:
        return CheckResult(spec.name, "spec", Status.FAIL, problems[0], problems)
    if not checked:
        return CheckResult(spec.name, "spec", Status.PASS, f"loaded; its seed is not runnable here ({seeds.seeds_dir()})")
    return CheckResult(spec.name, "spec", Status.PASS, "loaded; matches the example")


def check_template(spec: FamilySpec) -> CheckResult:
    from vlcheck.conformance import template_conformance

    return combine(spec.name, "template", [template_conformance(spec, v) for v in spec.variants])


def check_stops(spec: FamilySpec) -> CheckResult:
    from vlcheck.conformance import stop_conformance

    return combine(spec.name, "stops", [stop_conformance(spec, v) for v in spec.variants])


def check_engine_args(spec: FamilySpec) -> CheckResult:
    from vlcheck.vllm_checks import engine_args_check

    return combine(spec.name, "engine_args", [engine_args_check(spec, v) for v in spec.variants])


def check_architecture(spec: FamilySpec) -> CheckResult:
    from vlcheck.vllm_checks import architecture_check

    return combine(spec.name, "architecture", [architecture_check(spec, v) for v in spec.variants])


def check_processor(spec: FamilySpec) -> CheckResult:
    from vlcheck.processor_check import processor_check

    return combine(spec.name, "processor", [processor_check(spec, v) for v in spec.variants])


CPU_CHECKS: dict[str, Check] = {
    "spec": check_spec,
    "engine_args": check_engine_args,
    "architecture": check_architecture,
    "template": check_template,
    "stops": check_stops,
    "processor": check_processor,
}


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
                results.append(CheckResult(spec.name, name, Status.FAIL, f"check crashed: {type(err).__name__}: {err}"))
    return results
