"""The catalogue's contract (`vlcheck/gate/checks.py`): every check names the pytest test that runs
it per family-config, and that test runs it through `runners.testing.run_check`, so `vlcheck check`,
`vlcheck diff` and the pytest tier see the same function, declarations and facts. An engine check
is its shipped test (`vlcheck/runners/tier/engine/`), whose outcome is the cell for every runner
(`runners/engine_cells.py`): `vlcheck check --gpu` runs that tier (`runners/engine_run.py`)."""

import re
from pathlib import Path

import pytest

from vlcheck.gate.checks import CATALOGUE
from vlcheck.spec.schema import CHECKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("check", list(CATALOGUE.values()), ids=lambda c: c.name)
def test_every_check_names_its_test(check):
    path, _, name = check.test.partition("::")
    source = (ROOT / path).read_text()
    assert re.search(rf"^def {name}\(", source, re.M), f"{check.name}: {check.test} does not exist"
    body = source.split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
    runs = (f'run_check(request, "{check.name}"', f'assert_check_as_snapshot(request, "{check.name}"')
    assert any(call in body for call in runs), f"{check.test} does not run the catalogue's {check.name}"


@pytest.mark.parametrize("check", list(CATALOGUE.values()), ids=lambda c: c.name)
def test_declarations_of_every_check_can_be_written(check):
    """A spec can declare a deviation of it (spec.schema.CHECKS), or of the check it is declared as;
    `spec` (the spec itself) and `hostile` (its own `known_broken` per case) have no deviation."""
    if check.name in ("spec", "hostile"):
        return
    assert (check.declared_as or check.name) in CHECKS, f"{check.name}: add it to spec/schema.py's CHECKS"


def test_names_are_unique_and_the_runs_are_there():
    names = list(CATALOGUE)
    assert len(names) == len(set(names))
    for check in list(CATALOGUE.values()):
        assert (check.run is None) == (check.per_family is not None), check.name


ENGINE_TESTS = ROOT / "vlcheck" / "runners" / "tier" / "engine"


def _engine_cells(tmp_path, runner: list[str]) -> dict:
    """The engine cells of qwen2_vl from `runner` (a command writing a report to tmp_path/r.json)."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "VLCHECK_STORE": "none"}
    done = subprocess.run([sys.executable, *runner], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert (tmp_path / "r.json").exists(), done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    return {check: {k: (v["status"], v["reason"]) for k, v in cell["variants"].items()}
            for check, cell in report["families"]["qwen2_vl"]["checks"].items() if "." in check}


def test_every_engine_test_is_a_cell_and_check_gpu_gives_pytests_cells(tmp_path, request):
    """One definition: the README's GPU tier command and `vlcheck check --gpu` give qwen2_vl the same
    engine cells, one per engine test, named after it, and the `defaults` configuration's (on a machine
    without a GPU every one skips, saying why)."""
    pytest.importorskip("vllm")
    if request.config.getoption("--vlcheck-family"):  # CI's second, narrowed run: once is enough (161 s of 2 cores)
        pytest.skip("compares two whole runners' cells: runs in whole-suite runs (it reads no Hub file of its own)")
    from_pytest = _engine_cells(tmp_path, ["-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                                           "--vlcheck-serve", "all", "--vlcheck-config", "defaults",
                                           "--vlcheck-family", "qwen2_vl", "--vlcheck-engine-report",
                                           str(tmp_path / "r.json"), str(ENGINE_TESTS)])
    (tmp_path / "r.json").unlink()
    from_check = _engine_cells(tmp_path, ["-m", "vlcheck.cli", "check", "--gpu", "--check", "none", "--family",
                                          "qwen2_vl", "--json", str(tmp_path / "r.json")])
    assert from_check == from_pytest
    tests = {m for f in ENGINE_TESTS.glob("test_*.py")
             for m in re.findall(r"^def (test_\w+)\(\s*family, variant", f.read_text(), re.M)}
    own = {"test_configuration", "test_engine_facts_as_reported"}  # each writes its own, richer cell
    assert "engine.defaults" in from_check
    named = {c.split("[")[0].removeprefix("engine.") for c in from_pytest} - {"defaults"}
    assert named == {t.removeprefix("test_") for t in tests - own}, sorted(named ^ {t.removeprefix("test_") for t in tests - own})


def _configs(args: list[str]) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == "--vlcheck-config"]


def test_check_gpu_and_tier_gpu_choose_the_same_configurations_and_serve_alike(tmp_path):
    """`vlcheck check --gpu` measured eager only and served nothing while `vlcheck tier gpu` ran
    `defaults` and the served checks (an H100, 2026-11-28: llava's 10 served cells skipped in one,
    passed in the other)."""
    import argparse

    from vlcheck.cli.tier_command import gpu_environment, gpu_pytest_args
    from vlcheck.runners import engine_run

    check = engine_run.command("gpu", ["llava"], [], "auto", tmp_path / "r.json")
    assert _configs(check) == _configs(gpu_pytest_args([])) == ["defaults"]
    assert check[check.index("--vlcheck-serve") + 1] == "all"
    tier = argparse.Namespace(family=None, gpus=None, jobs=None, shard=None, deadline=None, config_timeout=None,
                              out=None, compile_cache=None, record=False, serve=None)
    assert gpu_environment(tier)["SERVE"] == "all"  # the tier serves all unless --serve says less
    assert gpu_environment(argparse.Namespace(**{**vars(tier), "serve": ["none"]}))["SERVE"] == ""
    chosen = engine_run.command("gpu", ["llava"], ["chunked"], "auto", tmp_path / "r.json")
    assert _configs(chosen) == _configs(gpu_pytest_args(["--", "--vlcheck-config", "chunked"])) == ["chunked"]
    on_cpu = engine_run.command("cpu", ["llava"], [], "auto", tmp_path / "r.json")
    assert _configs(on_cpu) == [] and "--vlcheck-serve" not in on_cpu  # a served CPU-build engine costs minutes
