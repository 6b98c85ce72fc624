"""`vlcheck merge`: the shards' reports together are the report of one unsharded run, and
reports that cannot be one are refused with what disagrees."""

import copy
import json

import pytest

from vlcheck.core.results import CheckResult, Status
from vlcheck.cli import main as cli
from vlcheck.gate import diff, report
from vlcheck.gate.checks import CATALOGUE, Check, run_checks
from vlcheck.runners.merge import MergeError, merge
from vlcheck.runners.shard import Shard, select
from vlcheck.spec.registry import all_families


def check_gpus(spec):
    """A quick stand-in check with every status, so that the matrix has more than passes."""
    status = {1: Status.PASS, 2: Status.SKIP, 4: Status.DEVIATION}.get(spec.gpus_needed, Status.FAIL)
    return CheckResult(spec.name, "gpus", status, f"{spec.gpus_needed} GPUs", data={"gpus": spec.gpus_needed})


CHECKS = {"spec": CATALOGUE["spec"], "gpus": Check("gpus", None, "", per_family=check_gpus)}  # quick ones


@pytest.fixture(scope="module")
def results():
    return run_checks(all_families().values(), CHECKS)


def _report(results, shard=None):
    families = all_families()
    if shard is not None:
        families = {s.name: s for s in select(families.values(), shard)}
    rep = report.build([r for r in results if r.family in families], list(CHECKS), families)
    if shard is not None:
        rep["shard"] = str(shard)
    return rep


def _matrix(rep):
    return {k: rep[k] for k in ("schema", "checks", "summary", "families")}


@pytest.mark.parametrize("count", [2, 3])
def test_merged_shards_equal_the_unsharded_report(results, count):
    shards = {f"shard{i}.json": _report(results, Shard(i, count)) for i in range(1, count + 1)}
    families = [name for rep in shards.values() for name in rep["families"]]
    assert sorted(families) == sorted(all_families()) and len(set(families)) == len(families)
    merged = merge(shards)
    whole = _report(results)
    assert _matrix(merged) == _matrix(whole)
    assert list(merged["families"]) == list(whole["families"])  # same row order: the HTML and Markdown too
    assert not diff.compare(whole, merged).regressed and not diff.compare(whole, merged).moved


def test_statuses_unknown_to_this_version_are_copied_and_counted(results):
    one, two = _report(results, Shard(1, 2)), _report(results, Shard(2, 2))
    family = next(iter(two["families"]))
    two["families"][family]["checks"]["spec"]["status"] = "error"
    two["families"][family]["checks"]["gpus"]["status"] = "a status from the future"
    merged = merge({"1.json": one, "2.json": two})
    assert merged["families"][family]["checks"]["gpus"]["status"] == "a status from the future"
    assert merged["summary"]["error"] == 1 and merged["summary"]["a status from the future"] == 1
    assert sum(merged["summary"].values()) == len(all_families()) * len(CHECKS)


def test_a_family_split_over_two_reports_by_check_is_joined(results):
    whole = _report(results)
    spec_only, gpus_only = copy.deepcopy(whole), copy.deepcopy(whole)
    for row in spec_only["families"].values():
        del row["checks"]["gpus"]
    for row in gpus_only["families"].values():
        del row["checks"]["spec"]
    assert _matrix(merge({"gpus.json": gpus_only, "spec.json": spec_only})) == _matrix(whole)


def _refused(reports, match):
    with pytest.raises(MergeError, match=match):
        merge(reports)


def test_overlapping_or_conflicting_cells_are_refused(results):
    one, two = _report(results, Shard(1, 2)), _report(results, Shard(2, 2))
    family = next(iter(one["families"]))
    overlap = copy.deepcopy(two)
    overlap["families"][family] = copy.deepcopy(one["families"][family])
    _refused({"1.json": one, "2.json": overlap}, f"{family} spec: in 1.json and in 2.json \\(the same result\\)")
    overlap["families"][family]["checks"]["spec"]["status"] = "fail"
    _refused({"1.json": one, "2.json": overlap}, "a conflicting result")


def test_different_environments_schemas_or_checks_are_refused(results):
    one, two = _report(results, Shard(1, 2)), _report(results, Shard(2, 2))
    newer = copy.deepcopy(two)
    newer["environment"]["vllm"] = "9.9.9"
    _refused({"1.json": one, "2.json": newer}, "different environments .*vllm: '.*' vs '9.9.9'")
    fewer = copy.deepcopy(two)
    fewer["checks"] = ["spec"]
    _refused({"1.json": one, "2.json": fewer}, "checks differs")
    other_host = copy.deepcopy(two)
    other_host["environment"]["platform"] = "Linux-6.99"
    assert merge({"1.json": one, "2.json": other_host})["environment"]["platform"].endswith(" | Linux-6.99")


def test_a_missing_or_repeated_shard_is_refused(results):
    one, two, three = (_report(results, Shard(i, 3)) for i in (1, 2, 3))
    _refused({"1.json": one, "3.json": three}, "missing shard 2/3")
    _refused({"1.json": one, "again.json": copy.deepcopy(one), "3.json": three}, "shard 1/3 given twice")
    _refused({"1.json": one, "2.json": _report(results, Shard(2, 2))}, "shards of different splits")
    _refused({"1.json": one, "all.json": _report(results)}, "some reports are shards and some are not")


def test_merge_command(results, tmp_path, capsys):
    paths = []
    for i in (1, 2):
        paths.append(tmp_path / f"shard{i}.json")
        paths[-1].write_text(json.dumps(_report(results, Shard(i, 2))))
    out = tmp_path / "all.json"
    assert cli.main(["merge", *map(str, paths), "-o", str(out), "--markdown", str(tmp_path / "all.md")]) == 0
    assert _matrix(json.loads(out.read_text())) == _matrix(_report(results))
    assert (tmp_path / "all.md").read_text() == report.to_markdown(json.loads(out.read_text())) + "\n"
    assert cli.main(["merge", str(paths[0]), "-o", str(out)]) == 2  # bad input
    assert "missing shard 2/2" in capsys.readouterr().err
