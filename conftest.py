"""This repository's tests run on vlcheck's pytest plugin (vlcheck/runners/pytest_plugin.py), the one
`pip install vlcheck` registers (pyproject's pytest11 entry point); an install made before it had
one (an editable install of an older checkout) gets it from here."""

from importlib.metadata import entry_points

import pytest


@pytest.fixture(autouse=True)
def _no_result_store_inside_tests(monkeypatch):
    """`vlcheck check` run by a test measures: a stored cell could hide what the test monkeypatched
    (tests/report/test_store.py gives the store its own folder). The catalogue's checks that the
    tier runs per family-config (`runners.testing.run_check`) use the session's store, chosen when
    the session started ($VLCHECK_STORE or --vlcheck-store), and share it with `vlcheck check`."""
    monkeypatch.setenv("VLCHECK_STORE", "none")

pytest_plugins = ([] if any(ep.value == "vlcheck.runners.pytest_plugin" for ep in entry_points(group="pytest11"))
                  else ["vlcheck.runners.pytest_plugin"])


@pytest.fixture
def run_engine_tests(tmp_path):
    """`run_engine_tests(test_file, *pytest_args)`: one of the shipped engine test files run through the
    installed plugin in a pytest of its own, from the repository's root: (the finished process, each skipped
    test's reason by test name). Where no engine can start here, what it shows is what comes before one."""
    import subprocess
    import sys
    import xml.etree.ElementTree as ET
    from pathlib import Path

    root = Path(__file__).resolve().parent
    runs = iter(range(1000))

    def run(test_file: str, *args: str):
        junit = tmp_path / f"junit-{next(runs)}.xml"
        ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cpu_engine",
                              f"--junitxml={junit}", *args, f"vlcheck/runners/tier/engine/{test_file}"],
                             capture_output=True, text=True, cwd=root, timeout=300)
        skips = {case.get("name"): case.find("skipped").get("message", "") for case in ET.parse(junit).iter("testcase")
                 if case.find("skipped") is not None} if junit.exists() else {}
        return ran, skips

    return run
