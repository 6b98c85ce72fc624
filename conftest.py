"""This repository's tests run on vlcheck's pytest plugin (vlcheck/runners/pytest_plugin.py), the one
`pip install vlcheck` registers (pyproject's pytest11 entry point); an install made before it had
one (an editable install of an older checkout) gets it from here."""

import os
from importlib.metadata import entry_points

# `vlcheck check` run by a test measures: a stored cell could hide what the test monkeypatched
# (tests/report/test_store.py gives the store its own folder)
os.environ.setdefault("VLCHECK_STORE", "none")

pytest_plugins = ([] if any(ep.value == "vlcheck.runners.pytest_plugin" for ep in entry_points(group="pytest11"))
                  else ["vlcheck.runners.pytest_plugin"])
