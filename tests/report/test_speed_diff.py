"""`vlcheck diff --speed`: a `vlcheck speed ab` run of the same two versions joins the verdict (SLOWER
is a regression, on one machine only); a run of other versions is refused."""

import copy
import json

import pytest

from vlcheck.cli import main as cli
from vlcheck.gate import report
from vlcheck.gate.checks import cpu_checks, run_checks
from vlcheck.spec.registry import get_family


@pytest.fixture(scope="module")
def reports():
    checks = cpu_checks(("spec",))
    rep = report.build(run_checks([get_family("llava")], checks), list(checks), {"llava": get_family("llava")})
    return rep, copy.deepcopy(rep)


def speed_report(rep, verdict, same_machine=True, vllm=None, vllm_code=None):
    env = {"versions": {"vllm": rep["environment"]["vllm"], "transformers": rep["environment"]["transformers"]},
           "machine": {"cpu": "c", "cores": 2, "gpu": None}, "path": "x",
           "code": {p: entry["digest"] for p, entry in rep["environment"]["code"].items()}}
    candidate = copy.deepcopy(env)
    if vllm:
        candidate["versions"]["vllm"] = vllm
    if vllm_code:
        candidate["code"]["vllm"] = vllm_code
    comparison = {"metric": "processor", "baseline_s": 0.001, "candidate_s": 0.0014, "ratio": 1.4, "noise": 0.02,
                  "threshold": 1.083, "verdict": verdict, "z": 16.8}
    return {"environments": {"baseline": env, "candidate": candidate}, "same_machine": same_machine, "sessions": 4,
            "rounds": 5, "repeats": 10, "seconds": 1.0,
            "family_configs": [{"family": "llava", "variant": "single", "verdict": verdict, "skip": {},
                                "comparisons": [comparison], "session_medians": {}}]}


def run(tmp_path, old, new, speed, capsys):
    for name, value in (("old.json", old), ("new.json", new), ("speed.json", speed)):
        (tmp_path / name).write_text(json.dumps(value))
    code = cli.main(["diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--speed", str(tmp_path / "speed.json"),
                     "--json", str(tmp_path / "diff.json")])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_slower_on_one_machine_is_a_regression_named_with_its_ratio(tmp_path, capsys, reports):
    code, out = run(tmp_path, *reports, speed_report(reports[0], "SLOWER"), capsys)
    assert code == 4 and "llava speed.processor: single.seconds_per_call" in out and "SLOWER x1.4" in out
    assert json.loads((tmp_path / "diff.json").read_text())["regressions"][0]["check"] == "speed.processor"


def test_the_same_speed_is_listed_and_decides_nothing(tmp_path, capsys, reports):
    code, out = run(tmp_path, *reports, speed_report(reports[0], "same"), capsys)
    assert code == 0 and "llava-single processor: same x1.4" in out


def test_two_machines_are_reported_never_decided(tmp_path, capsys, reports):
    code, out = run(tmp_path, *reports, speed_report(reports[0], "SLOWER", same_machine=False), capsys)
    assert code == 0 and "different machines: reported, not decided" in out and "processor: reported x1.4" in out


def test_a_speed_run_of_other_code_is_refused_by_version_and_by_content(tmp_path, capsys, reports):
    code, out = run(tmp_path, *reports, speed_report(reports[0], "SLOWER", vllm="0.0.1"), capsys)
    assert code == 2 and "its candidate timed vllm 0.0.1" in out
    # the same version, other files (a patched or planted vLLM): other code
    code, out = run(tmp_path, *reports, speed_report(reports[0], "SLOWER", vllm_code="f" * 64), capsys)
    assert code == 2 and "its candidate timed vllm code ffffffffffff" in out
