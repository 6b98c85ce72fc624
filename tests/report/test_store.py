"""The result store (issue 38): a cell is reused only when everything it depends on hashes the
same, and a reused cell is the cell that was measured."""

import dataclasses
import os

import pytest

from vlcheck.core.results import CheckResult, Status
from vlcheck.gate import cell_inputs
from vlcheck.gate.report import as_json
from vlcheck.gate.checks import Check, cpu_checks, run_checks, run_family_config
from vlcheck.gate.store import ResultStore
from vlcheck.spec.registry import get_family

FAMILIES = ("llava", "qwen2_vl")


def _cells(results):
    """What a report holds of each cell (`report.as_json`: tuples become lists there as in the store)."""
    return [(r.family, r.check, r.status, r.reason, r.finding, as_json(r.data), as_json(r.variants)) for r in results]


@pytest.fixture(scope="module")
def families():
    return [get_family(name) for name in FAMILIES]


def test_a_second_run_reuses_every_cell_and_returns_what_was_measured(families, tmp_path):
    checks = cpu_checks(["spec", "template"])
    first = ResultStore(tmp_path)
    measured = run_checks(families, checks, store=first)
    assert (first.reused, first.stored) == (0, 4)
    again = ResultStore(tmp_path)
    reused = run_checks(families, checks, store=again)
    assert (again.reused, again.stored) == (4, 0)
    assert sorted(again.reused_cells) == [(f, c) for f in FAMILIES for c in ("spec", "template")]
    assert _cells(reused) == _cells(measured)

    fresh = ResultStore(tmp_path, fresh=True)
    run_checks(families, checks, store=fresh)
    assert (fresh.reused, fresh.stored) == (0, 4)


def test_a_changed_spec_is_measured_again_and_only_it(families, tmp_path):
    checks = cpu_checks(["spec"])
    run_checks(families, checks, store=ResultStore(tmp_path))
    changed = [dataclasses.replace(families[0], title=families[0].title + " (edited)"), families[1]]
    store = ResultStore(tmp_path)
    run_checks(changed, checks, store=store)
    assert (store.reused, store.stored) == (1, 1)


def test_an_error_cell_is_never_stored(families, tmp_path):
    def crashes(spec, variant):
        raise RuntimeError("vlcheck's own bug")

    checks = {"spec": Check("spec", crashes, "tests/x.py::t")}
    store = ResultStore(tmp_path)
    results = run_checks(families[:1], checks, store=store)
    assert results[0].status is Status.ERROR and store.stored == 0
    assert not list(tmp_path.rglob("*.json"))


def test_the_engine_and_its_configuration_are_part_of_the_key(families, tmp_path):
    store = ResultStore(tmp_path)
    check = Check("cpu_engine", lambda s, v, e: CheckResult(s.name, "cpu_engine", Status.PASS), "t", engine=True)
    cpu = {"platform": "cpu", "weights": "seeded", "gpu": None}
    assert store.key(check, families[0], cpu) != store.key(check, families[0], {**cpu, "weights": "synthetic"})
    chunked = dataclasses.replace(check, engine_overrides={"max_num_batched_tokens": 16})
    assert store.key(check, families[0], cpu) != store.key(chunked, families[0], cpu)


def test_the_code_digest_follows_imports_lazy_ones_included():
    reached = cell_inputs._imports("vlcheck.gate.store")
    assert {"vlcheck.gate.cell_inputs", "vlcheck.core.results"} <= reached
    # gate.checks imports vlcheck.numerics.engine_check inside the `cpu_engine` cell's function only
    assert "vlcheck.numerics.engine_check" in cell_inputs._imports("vlcheck.gate.checks")
    assert "vlcheck.numerics.engine_check" in cell_inputs._function_imports("vlcheck.gate.checks", "_cpu_engine")
    spec_check = cell_inputs._function_imports("vlcheck.gate.checks", "check_spec")
    assert "vlcheck.examples.seed_check" in spec_check and "vlcheck.numerics.engine_check" not in spec_check
    assert cell_inputs.code_digest("vlcheck.gate.store") != cell_inputs.code_digest("vlcheck.core.results")


def test_a_hub_file_with_other_content_changes_the_key(tmp_path, monkeypatch):
    repo = tmp_path / "models--org--model"
    snapshot = repo / "snapshots" / "abc"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    (repo / "blobs" / "1111").write_text("{}")
    (repo / "blobs" / "2222").write_text("{ }")
    os.symlink("../../blobs/1111", snapshot / "config.json")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # what prompt.assets.hub_cache() reads
    before = cell_inputs.model_files("org/model")
    (snapshot / "config.json").unlink()
    os.symlink("../../blobs/2222", snapshot / "config.json")
    assert cell_inputs.model_files("org/model") != before
    assert cell_inputs.model_files("org/absent") == ["not in the Hub cache"]


def test_a_lazily_named_check_is_keyed_by_the_code_it_names(families, tmp_path, monkeypatch):
    """Most catalogue checks are `_lazy("module:function")` partials: the key must follow the named
    function's code, not the wrapper's (which reaches 7 modules and none of the check's)."""
    store = ResultStore(tmp_path)
    hostile = cpu_checks(["hostile"])["hostile"]
    before = store.key(hostile, families[0])
    module = hostile.run.args[0].partition(":")[0]
    real = cell_inputs._sources()[module]
    edited = tmp_path / "edited.py"
    edited.write_text(real.read_text() + "\n# an edit\n")
    monkeypatch.setitem(cell_inputs._sources(), module, edited)
    cell_inputs.code_digest.cache_clear()
    cell_inputs._tree.cache_clear()
    try:
        assert store.key(hostile, families[0]) != before
    finally:
        monkeypatch.undo()
        cell_inputs.code_digest.cache_clear()
        cell_inputs._tree.cache_clear()


def test_the_pytest_tier_and_vlcheck_check_measure_each_family_config_once_between_them(families, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from vlcheck.gate import checks as gate_checks
    from vlcheck.runners import testing

    llava = families[0]
    tier_config = SimpleNamespace(getoption=lambda name, default=None: {"--vlcheck-store": str(tmp_path)}.get(name, default))
    request = SimpleNamespace(config=tier_config)
    tested = testing.run_check(request, "template", llava, llava.single)  # the README's command measures it
    measured = []
    real = gate_checks.run_variant
    monkeypatch.setattr(gate_checks, "run_variant", lambda check, spec, variant, engine=None:
                        measured.append((spec.name, variant.kind)) or real(check, spec, variant, engine))
    store = ResultStore(tmp_path)
    cells = run_checks([llava], cpu_checks(["template"]), store=store)  # then vlcheck check
    assert measured == [("llava", v.kind) for v in llava.variants if v.kind != "single"]
    assert store.reused_variants == 1 and cells[0].variants["single"]["status"] == tested.status.value
    assert cells[0].variants["single"]["reason"] == tested.reason
    # and the tier after it measures nothing
    measured.clear()
    for variant in llava.variants:
        testing.run_check(request, "template", llava, variant)
    assert measured == []


def test_vlcheck_check_says_how_many_family_configs_it_took_from_the_store(families, tmp_path):
    checks = cpu_checks(["template"])
    llava = families[0]
    run_family_config(checks["template"], llava, llava.single, ResultStore(tmp_path))  # the tier measured single
    store = ResultStore(tmp_path)
    run_checks([llava], checks, store=store, jobs=1)
    assert (store.reused, store.stored, store.reused_variants) == (0, 1, 1)
