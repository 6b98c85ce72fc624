"""Helpers the tests share (test modules import them; the plugin's hooks are in pytest_plugin.py).

Every failing test says in its first line the family, the variant, the check and why. A check
that vlcheck itself could not run (status `error`, or a `SuiteError`) is reported by pytest as an
error, apart from the failures that describe vLLM's or transformers' behaviour (see pytest_plugin.py).
"""

from __future__ import annotations

import pytest

from vlcheck.core.results import CheckResult, Status, SuiteError, raised_by
from vlcheck.spec.schema import FamilySpec, Variant


def headline(result: CheckResult, variant: Variant) -> str:
    """`family [variant] check: status: reason`, the first line of every failure message."""
    reason = result.reason.removeprefix(f"[{variant.kind}] ")
    return f"{result.family} [{variant.kind}] {result.check}: {result.status.value}: {reason}"


def fail_with(result: CheckResult, variant: Variant, problem: str | None = None) -> None:
    lines = [headline(result, variant) if problem is None else f"{result.family} [{variant.kind}] {result.check}: {problem}"]
    lines += result.details if problem is None else [result.reason, *result.details]
    if result.status is Status.ERROR:
        raise SuiteError("\n".join(lines))
    pytest.fail("\n".join(lines), pytrace=False)


def require_ok(result: CheckResult, variant: Variant) -> None:
    """Pass, declared deviation or skip (with its reason); a failure or an error fails the test."""
    if result.status is Status.SKIP:
        pytest.skip(headline(result, variant))
    if result.status in (Status.FAIL, Status.ERROR):
        fail_with(result, variant)


def assert_as_declared(result: CheckResult, variant: Variant, declared_as: str | None = None) -> None:
    """A CPU check's result is a pass, or, where the spec declares a deviation of that check (or
    of `declared_as`) for the installed versions, the declared deviation: a deviation that no
    longer happens fails, so the spec gets corrected."""
    key = declared_as or result.check
    if result.status is Status.ERROR:
        fail_with(result, variant)
    if variant.deviation(key) is not None:
        if result.status is not Status.DEVIATION:
            fail_with(result, variant, f"deviations.{key} is declared for "
                      f"{variant.deviations[key].scope} but the check {result.status.value}es now: "
                      "remove it from the spec or narrow its versions")
    elif result.status is Status.DEVIATION:
        return  # declared by the check's own table (hostile inputs' known_broken); a stale entry fails there
    elif result.status is not Status.PASS:
        fail_with(result, variant)


def expect_deviation(request: pytest.FixtureRequest, variant: Variant, check: str) -> None:
    """A declared deviation of `check` that applies to the installed versions makes the test a
    strict expected failure: it shows as xfail with the reason, and fails the day the deviation
    stops happening, so the spec gets corrected."""
    declared = variant.deviation(check)
    if declared is not None:
        request.applymarker(pytest.mark.xfail(reason=f"declared deviation ({declared.scope}): {declared.reason}",
                                              strict=True))
        expected = getattr(request.node, EXPECTED, [])
        setattr(request.node, EXPECTED, [*expected, (check, declared)])


EXPECTED = "_vlcheck_expected_deviations"
"""The test's declarations made strict expected failures, (check, declaration) each: the reporting hook
holds a failure to the findings they name (`uncovered_failure`)."""


def uncovered_failure(item: pytest.Item, failure: BaseException) -> str | None:
    """Why an expected failure is not the one declared: every declaration that made the test xfail
    names findings and the failure's message holds none of them; None when one covers it."""
    expected = getattr(item, EXPECTED, [])
    if not expected or any(declared.covers_finding(str(failure)) for _, declared in expected):
        return None
    return "; ".join(f"deviations.{check} {declared.covers_only}" for check, declared in expected)


def assert_as_scoped(request: pytest.FixtureRequest, variant: Variant, check: str,
                     problems: dict[str, list[str]], headline: str) -> None:
    """A test's problems per modality, against the declared deviation of `check`: one declared for
    the whole check is a strict expected failure (`expect_deviation`); one declared for some
    modalities (`modalities = ["video"]`) excuses those only: every other modality must pass,
    and the declared ones must still deviate (else the spec is out of date)."""
    declared = variant.deviation(check)
    if declared is None or not declared.modalities:
        if declared is not None:
            expect_deviation(request, variant, check)
        found = [p for ps in problems.values() for p in ps]
        assert not found, headline + "\n" + "\n".join(found)
        return
    others = [p for m, ps in problems.items() if not declared.covers(m) for p in ps]
    assert not others, (headline + f" (deviations.{check} covers {'/'.join(declared.modalities)} only)\n"
                        + "\n".join(others))
    excused = [p for m, ps in problems.items() if declared.covers(m) for p in ps]
    if not excused:
        pytest.fail(f"{variant.kind}: deviations.{check} is declared for {declared.scope} but "
                    f"{'/'.join(declared.modalities)} agree now: remove it from the spec or narrow its versions",
                    pytrace=False)
    pytest.xfail(f"declared deviation ({declared.scope}; the other modalities passed): {declared.reason} "
                 f"[now: {excused[0][:300]}]")


def modality_of(shape: str) -> str:
    """`"video x1"` -> `"video"`."""
    return shape.split(" ", 1)[0]


def is_suite_crash(excinfo: pytest.ExceptionInfo) -> bool:
    """A test failed because vlcheck's own code broke: a `SuiteError`, or an exception raised in
    vlcheck's code rather than vLLM's or transformers' (`core.results.raised_by`, the rule the
    report's `error` cells follow too). Assertions and pytest outcomes are never crashes."""
    from vlcheck.engine.watchdog import EngineDied

    if excinfo.errisinstance(SuiteError):
        return True
    if excinfo.errisinstance((AssertionError, EngineDied, pytest.fail.Exception, pytest.skip.Exception,
                              pytest.xfail.Exception)):
        return False
    return raised_by(excinfo.value) == "vlcheck"


# --- the catalogue in pytest, and --vlcheck-baseline ---------------------------------------------

class Baseline:
    """A user's own report (`vlcheck check --json` on the versions they run) that the pytest tier
    compares with instead of the repo's snapshots (`--vlcheck-baseline FILE`), with the changes
    they accepted (`--vlcheck-accepted FILE`). The rules are `vlcheck diff`'s, per family-config."""

    def __init__(self, path: str, accepted_path: str | None = None):
        from vlcheck.gate import accepted, diff, report

        self.path = path
        self.report = diff.load(path)
        self.accepted = accepted.load(accepted_path) if accepted_path else []
        self.environment = {k: v for k, v in report.environment().items() if k in ("vllm", "transformers", "torch")}

    def compare(self, check: str, result: CheckResult, variant: Variant | None) -> None:
        """Returns when the family-config (`variant`; None: a whole-family check) behaves as in
        the baseline; fails naming each regression, lost coverage or moved fact; skips where
        neither side measured it."""
        from vlcheck.gate import diff, report
        from vlcheck.gate.checks import unit

        row = self.report["families"].get(result.family)
        cell = row["checks"].get(check) if row else None
        if cell is None:
            pytest.skip(f"{result.family} {check}: not in the baseline {self.path}: nothing to compare with")
        kind = variant.kind if variant is not None else None
        old = diff.units(cell).get(kind) or diff.units(cell).get(None)
        if old is None:
            pytest.skip(f"{result.family} [{kind}] {check}: not in the baseline {self.path}")
        d = diff.Diff(self.report["environment"], self.environment)
        label = check if kind is None else f"{check} [{kind}]"
        not_applied = any(k.endswith(".declaration_not_applied") for k in result.data)
        if diff.compare_unit(d, result.family, label, old, unit(result), not_applied):
            informational = set(self.report.get("informational", {}).get(check, ()))
            prefix = f"{kind}." if kind and cell.get("variants") else None
            diff.compare_facts(d, result.family, label, diff._facts(cell, prefix, informational),
                               diff._facts({"data": report.as_json(result.data)}, prefix, informational),
                               self.report.get("tolerances", {}).get(check))
        d.apply(self.accepted)
        first = _headline(result, variant)
        if d.not_run:
            if result.status is Status.ERROR:
                raise SuiteError(first)
            pytest.skip(f"{d.not_run[0]} (baseline {self.path})")
        problems = [*(c.text() for c in d.regressions), *(c.text() for c in d.lost_coverage),
                    *(c.text() for c in d.moved)]
        if problems:
            pytest.fail(f"{first}\nagainst the baseline {self.path} "
                        f"(vllm {self.report['environment'].get('vllm')}, transformers "
                        f"{self.report['environment'].get('transformers')}):\n" + "\n".join(problems), pytrace=False)
        if result.status is Status.SKIP:
            pytest.skip(first)

    def compare_fact(self, family: str, check: str, fact: str, value) -> None:
        """One fact of a whole-family cell against the baseline's (e.g. `spec`'s `prompts`)."""
        from vlcheck.gate import diff, report

        cell = (self.report["families"].get(family) or {"checks": {}})["checks"].get(check)
        if cell is None or fact not in cell.get("data", {}):
            pytest.skip(f"{family} {check}: fact {fact} is not in the baseline {self.path}")
        d = diff.Diff(self.report["environment"], self.environment)
        diff.compare_facts(d, family, check, {fact: cell["data"][fact]}, {fact: report.as_json(value)})
        d.apply(self.accepted)
        if d.moved:
            pytest.fail(f"{family} {check}: against the baseline {self.path}:\n" + "\n".join(c.text() for c in d.moved),
                        pytrace=False)


def _headline(result: CheckResult, variant: Variant | None) -> str:
    return headline(result, variant) if variant is not None else \
        f"{result.family} {result.check}: {result.status.value}: {result.reason}"


def baseline_of(config: pytest.Config) -> Baseline | None:
    """The session's `--vlcheck-baseline`, loaded once (a bad file stops the session, naming it)."""
    path = config.getoption("--vlcheck-baseline", None)
    if not path:
        return None
    if not hasattr(config, "_vlcheck_baseline"):
        from vlcheck.gate.diff import ReportError

        try:
            config._vlcheck_baseline = Baseline(path, config.getoption("--vlcheck-accepted", None))
        except ReportError as err:
            raise pytest.UsageError(f"--vlcheck-baseline: {err}") from None
    return config._vlcheck_baseline


def result_store(config: pytest.Config):
    """The session's result store (`--vlcheck-store`, shared with `vlcheck check`), or None."""
    if not hasattr(config, "_vlcheck_store"):
        from vlcheck.gate.store import configured

        config._vlcheck_store = configured(config.getoption("--vlcheck-store", None),
                                           config.getoption("--vlcheck-fresh", False))
    return config._vlcheck_store


def measured(request: pytest.FixtureRequest, name: str, family: FamilySpec,
             variant: Variant | None = None) -> CheckResult:
    """The catalogue's check `name` on one family-config (a whole family without `variant`), from
    the session's result store when measured before, else measured (and stored); whatever its status."""
    from vlcheck.gate.checks import CATALOGUE, run_cell, run_family_config

    check, store = CATALOGUE[name], result_store(request.config)
    return run_cell(check, family, store=store) if variant is None else run_family_config(check, family, variant, store)


def run_check(request: pytest.FixtureRequest, name: str, family: FamilySpec,
              variant: Variant | None = None) -> CheckResult | None:
    """The catalogue's check `name` on one family-config (a whole family for `spec`), exactly as
    `vlcheck check` runs it, and shared with it through the result store: a family-config whose
    inputs hash as one measured before is not measured again (`--vlcheck-fresh`: measure all).

    With `--vlcheck-baseline FILE` it is compared with the baseline and None is returned when it
    behaves as there (the test then ends, passed: `if result is None: return`); it fails or skips
    otherwise. Without, an error fails the test as a VLCHECK ERROR, a skip skips it with the
    reason, and the result is returned for the test's own assertions (the repo's snapshots: the
    baseline of the pinned reference)."""
    result = measured(request, name, family, variant)
    baseline = baseline_of(request.config)
    if baseline is not None:
        baseline.compare(name, result, variant)
        return None
    if result.status is Status.ERROR:
        raise SuiteError(_headline(result, variant) + "".join(f"\n{d}" for d in result.details))
    if result.status is Status.SKIP:
        pytest.skip(_headline(result, variant))
    return result


def assert_check_as_snapshot(request: pytest.FixtureRequest, name: str, family: FamilySpec, variant: Variant,
                             family_snapshot, title: str) -> None:
    """Catalogue check `name` for the family-config: its fact `<variant>.<name>` (lines) held to the
    family's snapshot under `# <title>: <family> [<variant>]`, then its outcome to the declarations."""
    result = run_check(request, name, family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    lines = [f"# {title}: {family.name} [{variant.kind}]", *fact_lines(result, variant, name)]
    assert "\n".join(lines) + "\n" == family_snapshot
    assert_as_declared(result, variant)


def fact_lines(result: CheckResult, variant: Variant, fact: str) -> list[str]:
    return list(result.data.get(f"{variant.kind}.{fact}", []))
