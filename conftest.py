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
