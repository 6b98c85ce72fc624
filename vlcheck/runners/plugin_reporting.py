"""The pytest plugin's reporting: vlcheck's own crashes apart from vLLM's failures, every engine test's
cell (runners/engine_cells.py) written at the end, the result store closed."""

from __future__ import annotations

import pytest

from vlcheck.runners.plugin_collection import UnloadableSpec
from vlcheck.runners.testing import is_suite_crash, uncovered_failure


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Mark a test that failed because vlcheck's own code crashed, so that it is counted as an
    error of the suite, apart from the failures that describe vLLM's behaviour."""
    report = yield
    if (hasattr(report, "wasxfail") and call.excinfo is not None and report.when == "call"
            and not call.excinfo.errisinstance(pytest.xfail.Exception)):  # pytest.xfail(): vlcheck's own verdict
        uncovered = uncovered_failure(item, call.excinfo.value)
        if uncovered:  # another failure than the declared one: it fails, saying which the declaration names
            del report.wasxfail
            report.outcome = "failed"
            report.longrepr = f"{call.excinfo.exconly()}\n(not the declared failure: {uncovered})"
    callspec = getattr(item, "callspec", None)
    if report.failed and callspec and isinstance(callspec.params.get("family"), UnloadableSpec):
        report.user_properties.append(("vlcheck_spec_error", True))
    elif call.excinfo is not None and report.failed and is_suite_crash(call.excinfo):
        report.user_properties.append(("vlcheck_error", True))
    if item.get_closest_marker("gpu") is not None or item.get_closest_marker("cpu_engine") is not None:
        from vlcheck.runners.engine_cells import record

        record(item, report, call.excinfo.value if call.excinfo is not None else None)
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
            terminalreporter.line(f"{r.nodeid}: {_crash_line(r)[:200]}")


def _crash_line(report) -> str:
    """The exception a failed test ended with (`Type: message`), not a line of the traceback's source
    that happens to name one (a GPU run's summary quoted the test's own source for a missing `av`)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.splitlines()[0]
    lines = str(report.longrepr).strip().splitlines()
    return next((line[1:].strip() for line in reversed(lines) if line.startswith("E ")), lines[-1] if lines else "")
