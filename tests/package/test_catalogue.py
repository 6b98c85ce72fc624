"""The catalogue's contract (`vlcheck/gate/checks.py`): every check names the pytest test that runs
it per family-config, and that test runs it through `runners.testing.run_check`, so `vlcheck check`,
`vlcheck diff` and the pytest tier see the same function, declarations and facts."""

import re
from pathlib import Path

import pytest

from vlcheck.gate.checks import CATALOGUE, GPU_CATALOGUE
from vlcheck.spec.schema import CHECKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("check", [*CATALOGUE.values(), *GPU_CATALOGUE.values()], ids=lambda c: c.name)
def test_every_check_names_its_test(check):
    path, _, name = check.test.partition("::")
    source = (ROOT / path).read_text()
    assert re.search(rf"^def {name}\(", source, re.M), f"{check.name}: {check.test} does not exist"
    if not check.engine:  # the GPU tests predate the catalogue: they call the same gpu/ functions
        body = source.split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
        assert f'run_check(request, "{check.name}"' in body, f"{check.test} does not run the catalogue's {check.name}"


@pytest.mark.parametrize("check", [*CATALOGUE.values(), *GPU_CATALOGUE.values()], ids=lambda c: c.name)
def test_declarations_of_every_check_can_be_written(check):
    """A spec can declare a deviation of it (spec.schema.CHECKS), or of the check it is declared as;
    `spec` (the spec itself) and `hostile` (its own `known_broken` per case) have no deviation."""
    if check.name in ("spec", "hostile"):
        return
    assert (check.declared_as or check.name) in CHECKS, f"{check.name}: add it to spec/schema.py's CHECKS"


def test_names_are_unique_and_the_runs_are_there():
    names = [*CATALOGUE, *GPU_CATALOGUE]
    assert len(names) == len(set(names))
    for check in [*CATALOGUE.values(), *GPU_CATALOGUE.values()]:
        assert (check.run is None) == (check.per_family is not None), check.name
