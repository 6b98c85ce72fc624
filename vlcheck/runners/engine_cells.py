"""Every engine test's outcome as a report cell: the one definition of an engine check is its test.

A test on a live engine (marked `gpu` or `cpu_engine`) that takes a family-config is a check: its
cell is `engine.<name>` on GPUs and `cpu_engine.<name>` on vLLM's CPU build, `<name>` the test's
name without `test_` (and its own parameters, `repeat_simulation_hit_ratio[content-hash]`).
pytest's outcome is the cell's status (passed: pass, failed: fail, xfail: declared deviation,
skipped: skip with its reason, vlcheck's own crash: error) and the properties the test recorded
are its facts (shown by `vlcheck diff`, never compared: the status carries the rule). So
`pytest -m gpu`, `vlcheck tier gpu`, the CPU engine tier and `vlcheck check --gpu`/`--cpu-engine`
(which runs this tier) give one model the same cells: they run the same tests.

Tests that build their own cell from a richer result (`test_configuration`: the configuration's
cell with its proof; `test_engine_facts_as_reported`: the `cpu_engine` facts) are left to do so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from vlcheck.core.results import CheckResult, Status

OWN_CELLS = ("test_configuration", "test_engine_facts_as_reported")
STANDARD_PARAMS = ("engine_platform", "family", "variant")
CELLS = pytest.StashKey[dict]()
"""check name -> family -> {variant kind: CheckResult}, for the whole session."""
REASON_CHARS = 500


def session_cells(config: pytest.Config) -> dict:
    return config.stash.setdefault(CELLS, {})


def check_name(item: pytest.Item) -> str | None:
    """The cell an engine test's outcome fills, or None where the test is no per-family-config check."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "variant" not in callspec.params or item.originalname in OWN_CELLS:
        return None
    platform = callspec.params.get("engine_platform")
    if platform is None:  # a test marked gpu alone (not `engine`): the GPU's
        platform = "gpu" if item.get_closest_marker("gpu") is not None else None
        if platform is None:
            return None
    family, variant = callspec.params["family"], callspec.params["variant"]
    if variant is None:  # a spec that does not load
        return None
    from vlcheck.spec.schema import config_id

    own = callspec.id
    for standard in (platform, config_id(family, variant)):
        own = own.removeprefix(standard).removeprefix("-")
    name = item.originalname.removeprefix("test_") + (f"[{own}]" if own else "")
    return f"{'cpu_engine' if platform == 'cpu' else 'engine'}.{name}"


def status_of(report: pytest.TestReport) -> Status:
    if report.failed:
        return Status.ERROR if ("vlcheck_error", True) in report.user_properties else Status.FAIL
    if report.skipped:
        return Status.DEVIATION if hasattr(report, "wasxfail") else Status.SKIP
    return Status.PASS


def reason_of(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return f"declared: {report.wasxfail}"
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(report.longrepr)
        return text.strip()
    return "passed"


def facts_of(report: pytest.TestReport, kind: str) -> dict[str, Any]:
    facts = {}
    for name, value in report.user_properties:
        if name.startswith("vlcheck_"):
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            value = str(value)
        facts[f"{kind}.{name}"] = value
    return facts


def record(item: pytest.Item, report: pytest.TestReport, raised: BaseException | None = None) -> None:
    """The test's cell from its report: the call's, or the setup's where the test never ran; a
    failure keeps where it was raised (`frames`, the exceptions it wraps followed), which the
    diff's causes read for whose it is."""
    if report.when == "teardown" or (report.when == "setup" and report.passed):
        return
    name = check_name(item)
    if name is None:
        return
    family, variant = item.callspec.params["family"], item.callspec.params["variant"]
    status = status_of(report)
    reason = (reason_of(report).splitlines() or [""])[0][:REASON_CHARS]
    frames = []
    cause = library_exception(raised) if status in (Status.FAIL, Status.ERROR) else None
    if cause is not None:
        from vlcheck.core.results import frames_of

        frames = frames_of(cause)
    cell = CheckResult(family.name, name, status, f"[{variant.kind}] {reason}",
                       data=facts_of(report, variant.kind), frames=frames)
    session_cells(item.config).setdefault(name, {}).setdefault(family.name, {})[variant.kind] = cell


OUTCOMES = (AssertionError, pytest.fail.Exception, pytest.skip.Exception, pytest.xfail.Exception)


def library_exception(raised: BaseException | None) -> BaseException | None:
    """The exception a failure's frames should come from: a test's assertion or pytest's outcome is
    the test's verdict, never evidence of whose code broke (it would read as vlcheck's or pytest's);
    the library exception it wraps (an engine that did not start) is, else there is none."""
    seen = set()
    while isinstance(raised, OUTCOMES) and id(raised) not in seen:
        seen.add(id(raised))
        raised = raised.__cause__ or raised.__context__
    return raised


def informational(cells: dict) -> dict[str, list[str]]:
    """Per check these cells hold, the facts `vlcheck diff` shows but does not compare: all of a
    test's (its status is the finding)."""
    out: dict[str, list[str]] = {}
    for check, by_family in cells.items():
        facts = {key.split(".", 1)[1] for by_variant in by_family.values() for r in by_variant.values() for key in r.data}
        out[check] = sorted(facts)
    return out
