"""pytest configuration shared by every tier: options, the family list, snapshot fixtures.

The tiers are selected by marker: `pytest -m "not gpu"` (CPU, what CI runs) and `pytest -m gpu`.
"""

from __future__ import annotations

import pytest

from vlcheck.registry import all_families
from vlcheck.snapshots import FamilySnapshot


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlcheck")
    group.addoption("--vlcheck-family", action="append", default=[], metavar="NAME",
                    help="only check these families (repeatable); default: all specs")


def selected_families(config: pytest.Config) -> list[str]:
    names = list(all_families())
    wanted = config.getoption("--vlcheck-family")
    if wanted:
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise pytest.UsageError(f"--vlcheck-family: unknown family {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `family` runs once per selected family spec (id: the name); one that
    also takes `variant` runs once per example of it (id: `name-single`, `name-multi_image`)."""
    if "family" not in metafunc.fixturenames:
        return
    families = [all_families()[n] for n in selected_families(metafunc.config)]
    if "variant" in metafunc.fixturenames:
        pairs = [(f, v) for f in families for v in f.variants]
        metafunc.parametrize(("family", "variant"), pairs, ids=[f"{f.name}-{v.kind}" for f, v in pairs])
    else:
        metafunc.parametrize("family", families, ids=[f.name for f in families])


@pytest.fixture
def family_snapshot(snapshot):
    """A syrupy snapshot stored as `snapshots/<test file>/<family>.txt`."""
    return snapshot.use_extension(FamilySnapshot)
