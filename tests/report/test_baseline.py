"""`pytest --vlcheck-baseline FILE`: the pytest tier compares each family-config with a user's own
report (`vlcheck check --json` on the versions they run) by `vlcheck diff`'s rules, instead of the
repo's snapshots (the pinned reference's). Run in a child pytest, as a user runs it."""

import copy
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from vlcheck.gate import diff, report
from vlcheck.gate.accepted import draft
from vlcheck.gate.checks import cpu_checks, informational_facts, run_checks, tolerances
from vlcheck.spec.registry import get_family

ROOT = Path(__file__).resolve().parents[2]
TESTS = ["tests/vllm_cpu/test_processor.py::test_processor_expands_every_item",
         "tests/vllm_cpu/test_architecture.py::test_architecture_is_served",
         "tests/prompt_format/test_hub_conformance.py::test_hand_prompt_matches_chat_template"]  # tuples in its facts


@pytest.fixture(scope="module")
def baseline():
    families = {n: get_family(n) for n in ("llava", "qwen2_vl")}
    checks = cpu_checks(["architecture", "template", "processor"])
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


def test_moved_facts_fail_their_family_config_and_a_known_failure_passes(baseline, tmp_path):
    """Against the baseline: llava's single-image processor token count and architecture fact
    moved (those two fail, naming the fact); qwen2_vl's architecture failed in the baseline and
    passes here (fixed: passes); the rest behaves as in the baseline (passes)."""
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
    assert re.search(r"\b2 failed, \d+ passed", out) and not re.search(r"\b\d+ errors?\b", out), out  # skips: the Hub files' tests


def test_accepted_changes_pass(baseline, tmp_path):
    """The moved token count, reviewed and accepted (`--vlcheck-accepted`, as `vlcheck diff
    --draft-accepted` writes it): the family-config passes; without the file it fails."""
    from vlcheck.gate.checks import CATALOGUE, run_variant
    from vlcheck.runners.testing import Baseline

    old = copy.deepcopy(baseline)
    counts = old["families"]["llava"]["checks"]["processor"]["data"]["single.token_counts"]
    counts[next(iter(counts))]["prompt_tokens"] -= 40
    (tmp_path / "baseline.json").write_text(json.dumps(old))
    accepted = tmp_path / "accepted.toml"
    accepted.write_text(draft(diff.compare(old, baseline).moved).replace('reason = ""', 'reason = "reviewed"'))
    spec = get_family("llava")
    result = run_variant(CATALOGUE["processor"], spec, spec.single)
    assert Baseline(str(tmp_path / "baseline.json"), str(accepted)).compare("processor", result, spec.single) is None
    with pytest.raises(pytest.fail.Exception, match=r"single.token_counts"):
        Baseline(str(tmp_path / "baseline.json")).compare("processor", result, spec.single)


def test_a_bad_baseline_stops_the_session_naming_the_file(tmp_path):
    from vlcheck.runners.testing import baseline_of

    (tmp_path / "baseline.json").write_text("{}")
    config = types.SimpleNamespace(getoption=lambda name, default=None: {
        "--vlcheck-baseline": str(tmp_path / "baseline.json")}.get(name, default))
    with pytest.raises(pytest.UsageError, match=r"--vlcheck-baseline: .*baseline.json: schema: missing"):
        baseline_of(config)
