"""Sharding the suite over CI runners: every family in exactly one shard, balanced, the same
split on every runner."""

import os
import re
import subprocess
import sys
import time

import pytest

from vlcheck.runners.shard import (CPU_ENGINE_DURATIONS_FILE, Shard, durations_from_junit, durations_from_summary,
                                   family_weights, load_durations, partition, select)
from vlcheck.spec.registry import all_families


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "1/0", "a/b", "-1/2"])
def test_a_shard_outside_its_split_is_refused(text):
    with pytest.raises(ValueError, match="expected i/n"):
        Shard.parse(text)


def test_longest_first_onto_the_least_loaded_shard():
    weights = {"a": 10, "b": 8, "c": 5, "d": 3, "e": 3}
    # a->1 (10), b->2 (8), c->2 (13), then d and e (ties broken by name) -> 1 (13, 16)
    assert partition(weights, 2) == [["a", "d", "e"], ["b", "c"]]
    assert partition(weights, 1) == [["a", "b", "c", "d", "e"]]
    assert partition(weights, 7)[5:] == [[], []]  # more runners than families: the rest idle


def test_a_config_without_a_measured_duration_weighs_the_median():
    spec = all_families()["qwen2_vl"]  # two family-configs: single and multi_image
    assert family_weights([spec], {"qwen2_vl-single": 10, "x-single": 30, "y-single": 50}) == {"qwen2_vl": 10 + 30}


@pytest.mark.parametrize("count", [2, 3, 5])
def test_the_shards_hold_every_family_once_and_are_balanced(count):
    specs = list(all_families().values())
    parts = [select(specs, Shard(i, count)) for i in range(1, count + 1)]
    names = [s.name for part in parts for s in part]
    assert sorted(names) == sorted(s.name for s in specs) and len(set(names)) == len(names)
    weights = family_weights(specs, load_durations())
    loads = [sum(weights[s.name] for s in part) for part in parts]
    # greedy longest-first: no shard exceeds the lightest one by more than one family's weight
    assert max(loads) - min(loads) <= max(weights.values())
    assert parts == [select(specs, Shard(i, count)) for i in range(1, count + 1)]  # deterministic


def test_durations_are_read_from_a_gpu_tier_summary():
    summary = ("aria multi_image rc=0 65s 8 passed, 1 skipped, 1 xfailed in 50.1s\n"
               "ovis single rc=0 2s 10 skipped in 0.5s\n"
               "qwen2_vl single not started: DEADLINE=300s passed\n"
               "gpu tier: 304 s wall, JOBS=8\n")
    assert durations_from_summary(summary) == {"aria-multi_image": 65.0, "ovis-single": 2.0}


def test_the_cpu_engine_tiers_durations_are_its_tests_times_per_family_config():
    junit = ('<testsuites><testsuite>'
             '<testcase name="test_greedy_outputs_match_golden[cpu-llava-next-video-single]" time="2.5"/>'
             '<testcase name="test_configuration[cpu-llava-next-video-single-chunked]" time="4.0"/>'
             '<testcase name="test_engine_facts_as_reported[qwen2_vl-multi_image]" time="1.25"/>'
             '<testcase name="test_no_family" time="9"/></testsuite></testsuites>')
    assert durations_from_junit([junit]) == {"llava-next-video-single": 6.5, "qwen2_vl-multi_image": 1.2}


def test_the_durations_data_names_only_existing_family_configs():
    ids = {f"{s.name}-{v.kind}" for s in all_families().values() for v in s.variants}
    assert set(load_durations()) <= ids
    assert set(load_durations(CPU_ENGINE_DURATIONS_FILE)) <= ids


def test_the_cpu_engine_tier_splits_by_its_own_durations():
    # The GPU tier's data split the CPU engine tier 401 s / 505 s of tests in CI (its served family-configs,
    # qwen2_vl-single and llava-single, cost minutes on vLLM's CPU build and seconds on a GPU).
    weights = family_weights(list(all_families().values()), load_durations(CPU_ENGINE_DURATIONS_FILE))
    loads = [sum(weights[n] for n in part) for part in partition(weights, 2)]
    assert abs(loads[0] - loads[1]) <= 0.05 * sum(loads)


def _collected(*args):
    """The test ids pytest collects with these options (no test runs)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/vllm_cpu/test_engine_args.py", "tests/report/test_goldens.py", *args],
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "::" in line]


@pytest.mark.parametrize("durations", [[], ["--vlcheck-shard-durations", str(CPU_ENGINE_DURATIONS_FILE)]])
def test_pytest_shards_run_every_test_exactly_once(durations):
    whole = _collected()
    first, second = _collected("--vlcheck-shard", "1/2", *durations), _collected("--vlcheck-shard", "2/2", *durations)
    assert sorted(first + second) == sorted(whole) and not set(first) & set(second)
    family_free = [t for t in whole if "[" not in t]
    assert family_free and set(family_free) <= set(first)  # tests of no family: shard 1 only
    assert any("[" in t for t in first) and any("[" in t for t in second)


CLAIMING_TESTS = '''
import os, time
from pathlib import Path

def pytest_collection_finish(session):  # both shards start their queues together
    here = Path(os.environ["BARRIER"])
    (here / f"started-{os.getpid()}").touch()
    deadline = time.time() + 120
    while len(list(here.glob("started-*"))) < 2 and time.time() < deadline:
        time.sleep(0.05)
'''


def test_claiming_shards_run_every_test_once_whole_families_each(tmp_path):
    """--vlcheck-shard-claims: two shards side by side, each taking the next family as it becomes free."""
    (tmp_path / "conftest.py").write_text(CLAIMING_TESTS)
    (tmp_path / "test_toy.py").write_text("import time\n"
                                          "def test_config(family, variant):\n    time.sleep(0.2)\n"
                                          "def test_family(family):\n    pass\n"
                                          "def test_no_family():\n    pass\n")
    families = ["qwen2_vl", "llava", "idefics3", "gemma3", "blip-2", "pixtral_hf"]
    claims, barrier = tmp_path / "claims", tmp_path / "barrier"
    barrier.mkdir()
    shards = [subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "--rootdir", str(tmp_path),
         "--vlcheck-shard", f"{i}/2", "--vlcheck-shard-claims", str(claims),
         "--vlcheck-shard-durations", str(CPU_ENGINE_DURATIONS_FILE),
         *[a for f in families for a in ("--vlcheck-family", f)], str(tmp_path / "test_toy.py")],
        cwd=tmp_path, env={**os.environ, "BARRIER": str(barrier)}, stdout=subprocess.PIPE, text=True) for i in (1, 2)]
    ran = []
    for shard in shards:
        out = shard.communicate(timeout=300)[0]
        assert shard.returncode == 0, out[-2000:]
        ran.append(re.findall(r"^PASSED \S+::(\S+)", out, re.M))
    first, second = ran
    assert sorted(first + second) == sorted(set(first + second))  # none twice
    configs = sum(len(all_families()[f].variants) for f in families)
    assert len(first + second) == configs + len(families) + 1 and "test_no_family" in first  # none missed
    by_shard = [{re.search(r"\[(.+?)(?:-single|-multi_image)?\]", t)[1] for t in tests if "[" in t} for tests in ran]
    assert not by_shard[0] & by_shard[1]  # a family's tests, all of its family-configs', in one shard
    assert by_shard[0] and by_shard[1], by_shard  # both took families from the queue
    assert len(list(claims.iterdir())) == len(families) + 1  # a claim per family, and one for the tests of none


def test_an_earlier_runs_claims_stop_the_run_instead_of_leaving_their_families_unrun(tmp_path):
    (tmp_path / "test_toy.py").write_text("def test_config(family, variant):\n    pass\n")
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "llava").touch()
    an_hour_ago = time.time() - 3600
    os.utime(claims / "llava", (an_hour_ago, an_hour_ago))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                          "--vlcheck-shard", "1/2", "--vlcheck-shard-claims", str(claims), "--vlcheck-family", "llava",
                          "--vlcheck-family", "qwen2_vl", str(tmp_path / "test_toy.py")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-2000:] + run.stderr[-2000:]
    assert "1 family was claimed before this shard started (llava)" in run.stdout + run.stderr
    assert "passed" not in run.stdout  # nothing ran
