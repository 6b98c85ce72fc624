"""The result store serves a cell only for the code that measured it (issue 49): a package whose
code changed under the same version is measured again; the cells of the changed code never reach a
run on the clean one; a package that changes during a run takes back what the run stored; `vlcheck
store verify` measures stored cells again and names one that differs."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from vlcheck.core import installed_code
from vlcheck.core.results import CheckResult, Status
from vlcheck.gate import cell_inputs
from vlcheck.gate.checks import Check, cpu_checks, run_checks
from vlcheck.gate.store import ResultStore
from vlcheck.gate.store_verify import verify
from vlcheck.spec.registry import get_family


def _answer(spec, variant) -> CheckResult:
    """A check whose result is what the installed fakepkg computes."""
    import fakepkg

    return CheckResult(spec.name, "answer", Status.PASS, "", data={f"{variant.kind}.answer": fakepkg.answer()})


CHECKS = {"answer": Check("answer", _answer, "tests/report/test_store_code.py")}


def _new_process(monkeypatch) -> None:
    """What a new `vlcheck check` starts with: nothing imported, no digest cached."""
    monkeypatch.delitem(sys.modules, "fakepkg", raising=False)
    monkeypatch.delitem(sys.modules, "fakepkg.mod", raising=False)
    installed_code.identity.cache_clear()
    cell_inputs.installed.cache_clear()


@pytest.fixture(autouse=True)
def _digests_cached_only_here():
    yield
    installed_code.identity.cache_clear()
    cell_inputs.installed.cache_clear()


def _run(store_dir: Path) -> tuple[list, ResultStore]:
    store = ResultStore(store_dir)
    results = run_checks([get_family("llava")], CHECKS, store=store)
    assert store.close() == []
    return results, store


def _answers(results) -> set:
    """What the family-configs (llava's single and multi_image) computed."""
    return set(results[0].data.values())


def test_a_changed_line_under_the_same_version_is_measured_and_never_poisons_the_clean_code(
        site, tmp_path, monkeypatch, fake_package):
    store = tmp_path / "store"
    _new_process(monkeypatch)
    clean, first = _run(store)
    assert (first.reused, first.stored, _answers(clean)) == (0, 1, {42})

    mod = site / "fakepkg" / "mod.py"
    mod.write_text(fake_package.files["fakepkg/mod.py"].replace("42", "43"))  # version 1.0 still
    _new_process(monkeypatch)
    changed, second = _run(store)
    assert (second.reused, second.stored, _answers(changed)) == (0, 1, {43})

    mod.write_text(fake_package.files["fakepkg/mod.py"])  # restored: the first run's cells, not the changed code's
    _new_process(monkeypatch)
    again, third = _run(store)
    assert (third.reused, _answers(again)) == (1, {42})


def test_a_planted_copy_first_on_the_path_is_measured_again(site, tmp_path, monkeypatch, on_path, fake_package):
    store = tmp_path / "store"
    _new_process(monkeypatch)
    _run(store)
    planted = tmp_path / "planted"
    shutil.copytree(site / "fakepkg", planted / "fakepkg")
    (planted / "fakepkg" / "mod.py").write_text(fake_package.files["fakepkg/mod.py"].replace("42", "7"))
    on_path(planted)
    _new_process(monkeypatch)
    results, store_run = _run(store)
    assert (store_run.reused, _answers(results)) == (0, {7})


def test_code_that_changes_during_a_run_takes_back_what_the_run_stored(site, tmp_path, monkeypatch, fake_package):
    _new_process(monkeypatch)
    store = ResultStore(tmp_path / "store")
    run_checks([get_family("llava")], CHECKS, store=store)
    assert store.stored == 1 and len(list((tmp_path / "store").rglob("*.json"))) == 3  # the cell, its 2 family-configs
    (site / "fakepkg" / "mod.py").write_text(fake_package.files["fakepkg/mod.py"].replace("42", "43"))
    assert store.close() == ["fakepkg"]
    assert not list((tmp_path / "store").rglob("*.json"))
    assert store.get(store.key(CHECKS["answer"], get_family("llava"))) is None  # off for the rest of the run


def test_a_file_touched_during_a_run_keeps_what_the_run_stored(site, tmp_path, monkeypatch):
    _new_process(monkeypatch)
    store = ResultStore(tmp_path / "store")
    run_checks([get_family("llava")], CHECKS, store=store)
    os.utime(site / "fakepkg" / "mod.py")  # the cheap recheck sees a new mtime, the digest the same content
    assert store.close() == [] and len(list((tmp_path / "store").rglob("*.json"))) == 3


def test_store_verify_names_a_stored_cell_that_differs_and_takes_it_out(tmp_path):
    families, checks = [get_family("llava"), get_family("qwen2_vl")], cpu_checks(["spec"])
    store = ResultStore(tmp_path)
    run_checks(families, checks, store=store)
    verified, stored = verify(ResultStore(tmp_path), families, checks, sample=None)
    assert stored == 2 and [v.same for v in verified] == [True, True]

    key = store.key(checks["spec"], families[1])
    entry = next(tmp_path.rglob(f"{key}.json"))
    cell = json.loads(entry.read_text())  # a failure this code does not measure (it passes, or skips without seeds)
    cell["status"] = "fail"
    cell["variants"] = {kind: {**unit, "status": "fail", "finding": "stored for other code"}
                        for kind, unit in (cell.get("variants") or {}).items()}
    entry.write_text(json.dumps(cell))
    verified, _ = verify(ResultStore(tmp_path), families, checks, sample=None)
    assert [(v.family, v.same) for v in verified] == [("llava", True), ("qwen2_vl", False)]
    assert re.match(r"qwen2_vl spec( \[single\])?: fail -> (pass|skip)", verified[1].differences[0]), verified[1].differences
    assert not entry.exists()


def test_vlcheck_check_and_diff_through_the_cli_a_planted_copy_then_the_clean_code_again(
        site, tmp_path, monkeypatch, on_path, fake_package, capsys):
    """The issue's sequence through `vlcheck check` and `vlcheck diff`: clean, a changed copy first
    on the path (same version), clean again: the clean code gets its own cells back, SAFE."""
    from vlcheck.cli.main import main
    from vlcheck.gate import checks

    monkeypatch.setitem(checks.CATALOGUE, "answer", CHECKS["answer"])
    store = ResultStore(tmp_path / "store")  # the report's adapter description is not this test's: seeded (no vLLM import)
    store.put_fact(store.fact_key("vllm_adapter", "vlcheck.adapter", "describe"), {"seeded": "by the test"})
    monkeypatch.setenv("VLCHECK_STORE", str(store.path))
    planted = tmp_path / "planted"
    shutil.copytree(site / "fakepkg", planted / "fakepkg")
    (planted / "fakepkg" / "mod.py").write_text(fake_package.files["fakepkg/mod.py"].replace("42", "43"))

    def check(name: str) -> str:
        _new_process(monkeypatch)
        assert main(["check", "--family", "llava", "--check", "answer", "-j", "1", "--json", str(tmp_path / name)]) == 0
        return capsys.readouterr().err

    def diff(a: str, b: str) -> tuple[int, str]:
        code = main(["diff", str(tmp_path / a), str(tmp_path / b)])
        return code, capsys.readouterr().out

    assert "0 of 1 cells reused" in check("clean.json")
    with monkeypatch.context() as planting:
        planting.syspath_prepend(str(planted))
        assert "0 of 1 cells reused" in check("planted.json")
    assert "1 of 1 cells reused" in check("again.json")
    code, text = diff("clean.json", "planted.json")
    assert code == 5 and "llava answer [single]: single.answer: 42 -> 43" in text, text
    assert "fakepkg 1.0: the same version, other code" in text and str(planted / "fakepkg") in text
    code, text = diff("clean.json", "again.json")
    assert code == 0 and "the same code on both ends: vllm, transformers, torch" in text, text
