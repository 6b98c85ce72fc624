"""`pytest --vlcheck-baseline FILE`: the pytest tier compares each family-config with a user's own
report (`vlcheck check --json` on the versions they run) by `vlcheck diff`'s rules, instead of the
repo's snapshots (the pinned reference's). Run in a child pytest, as a user runs it."""

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vlcheck.gate import diff, report
from vlcheck.gate.accepted import draft
from vlcheck.gate.checks import cpu_checks, informational_facts, run_checks, tolerances
from vlcheck.spec.registry import get_family

ROOT = Path(__file__).resolve().parents[2]
TESTS = ["tests/vllm_cpu/test_processor.py::test_processor_expands_every_item",
         "tests/vllm_cpu/test_architecture.py::test_architecture_is_served"]


@pytest.fixture(scope="module")
def baseline():
    families = {n: get_family(n) for n in ("llava", "qwen2_vl")}
    checks = cpu_checks(["architecture", "processor"])
    return report.build(run_checks(families.values(), checks), list(checks), families,
                        informational=informational_facts(checks), tolerances=tolerances(checks))


def tier(tmp_path, rep, *extra):
    path = tmp_path / "baseline.json"
    path.write_text(rep if isinstance(rep, str) else json.dumps(rep))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-o", "addopts=", *TESTS,
                          "--vlcheck-family", "llava", "--vlcheck-family", "qwen2_vl", "--vlcheck-baseline", str(path),
                          *extra], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=600)
    return run.returncode, run.stdout + run.stderr


def test_moved_facts_fail_their_family_config_a_known_failure_passes_and_accepted_changes_pass(baseline, tmp_path):
    """Against the baseline: llava's single-image processor token count and architecture fact
    moved (those two fail, naming the fact); qwen2_vl's architecture failed in the baseline and
    passes here (fixed: passes); the rest behaves as in the baseline (passes). Then the two
    changes, reviewed and accepted (`--vlcheck-accepted`): all pass."""
    old = copy.deepcopy(baseline)
    llava = old["families"]["llava"]["checks"]
    counts = llava["processor"]["data"]["single.token_counts"]
    shape = next(iter(counts))
    counts[shape]["prompt_tokens"] -= 40
    llava["architecture"]["data"]["single.chat_placeholders"] = {"image": "<img>"}
    arch = old["families"]["qwen2_vl"]["checks"]["architecture"]
    arch["status"] = "fail"
    for unit in arch["variants"].values():
        unit.update(status="fail", finding="the class does not import", reason="the class does not import")
    code, out = tier(tmp_path, old)
    assert code == 1, out
    failed = sorted(re.findall(r"FAILED \S+::(\w+\[[\w-]+\])", out))
    assert failed == ["test_architecture_is_served[llava-single]", "test_processor_expands_every_item[llava-single]"], out
    assert f'llava processor [single]: single.token_counts["{shape}"]:' in out and "against the baseline" in out
    assert 'llava architecture [single]: single.chat_placeholders["image"]: <img> -> <image>' in out
    assert re.search(r"2 failed, 6 passed", out), out

    accepted = tmp_path / "accepted.toml"  # the changes, reviewed, as `vlcheck diff --draft-accepted` writes them
    accepted.write_text(draft(diff.compare(old, baseline).moved).replace('reason = ""', 'reason = "reviewed"'))
    code, out = tier(tmp_path, old, "--vlcheck-accepted", str(accepted))
    assert code == 0 and re.search(r"8 passed", out), out


def test_a_bad_baseline_stops_the_session_naming_the_file(tmp_path):
    code, out = tier(tmp_path, "{}")
    assert code == 4 and "--vlcheck-baseline:" in out and "baseline.json: schema: missing" in out, out
