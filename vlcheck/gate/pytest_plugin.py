"""vlcheck's pytest plugin, registered by `pip install vlcheck` (entry point `pytest11`: `vlcheck`).

Spec folders (`--vlcheck-specs DIR`, or `vlcheck_specs` in the pytest configuration, relative to
it) add the user's families, and, unless test paths are named, the shipped tier
(`vlcheck/gate/tier/`): `pytest -m "not gpu"` and `pytest -m gpu` then check the user's models.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vlcheck.spec.registry import SPEC_PATH_ENV, add_spec_dirs

TIER = Path(__file__).resolve().parent / "tier" / "test_tier.py"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlcheck", "vlcheck: conformance of vision-language models served by vLLM")
    group.addoption("--vlcheck-specs", action="append", default=[], metavar="DIR",
                    help=f"a folder of your own spec files (repeatable; also the ini option vlcheck_specs, and "
                         f"${SPEC_PATH_ENV}): their families are checked, and vlcheck's tier is collected unless "
                         "test paths are named")
    parser.addini("vlcheck_specs", type="paths", default=[],
                  help="folders of your own spec files, relative to this configuration file (as --vlcheck-specs)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a GPU and runs real vLLM engines (select with -m gpu; "
                                       "CI runs -m 'not gpu')")
    dirs = [*config.getoption("--vlcheck-specs"), *config.getini("vlcheck_specs")]
    if not dirs:
        return
    try:
        add_spec_dirs(dirs)
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    if config.args_source is not pytest.Config.ArgsSource.ARGS and str(TIER) not in config.args:
        config.args.append(str(TIER))
