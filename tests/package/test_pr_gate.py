"""The gate where users decide (issue 57): the GitHub workflow and action and the GitLab job that
`vlcheck pr template` prints are valid for their platforms (GitHub's and GitLab's published schemas,
and zizmor's security audit), and the action's own steps, run on two reports, write the verdict,
post one comment and update that same comment on the next push, and exit with the verdict's code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vlcheck.cli.pr_command import TEMPLATES, template_text
from vlcheck.gate.report import SCHEMA
from vlcheck.pr_gate.comment import MARKER
from vlcheck.pr_gate.pins import NoPin, read_pins

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = {"workflow": "vendor.github-workflows", "action": "vendor.github-actions", "gitlab": "vendor.gitlab-ci"}
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (the test extra installs it: pip install -e '.[test]')")
    return found


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_each_template_is_valid_for_its_platform(name, tmp_path):
    (tmp_path / TEMPLATES[name]).write_text(template_text(name))
    done = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", SCHEMAS[name], str(tmp_path / TEMPLATES[name])],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflow_and_action_have_no_security_finding_of_medium_or_high_severity(tmp_path):
    """zizmor, offline: pinned actions (by commit), no template injection into a script, no
    credentials left in the checkout. Its low `self-repository` hint about `./.github/actions/...` is
    GitHub's documented way to use a local action, kept."""
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/actions/vlcheck-gate").mkdir(parents=True)
    (tmp_path / ".github/workflows/vlcheck.yml").write_text(template_text("workflow"))
    (tmp_path / ".github/actions/vlcheck-gate/action.yml").write_text(template_text("action"))
    done = subprocess.run([_tool("zizmor"), "--offline", "--min-severity", "medium", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflow_calls_the_action_it_ships_beside(tmp_path):
    workflow = yaml.safe_load(template_text("workflow"))
    uses = [s["uses"] for job in workflow["jobs"].values() for s in job["steps"] if "vlcheck" in s.get("uses", "")]
    assert uses == ["./.github/actions/vlcheck-gate"] * 2
    assert "vlcheck pr template action > .github/actions/vlcheck-gate/action.yml" in template_text("workflow")


def _report(tokens: int) -> dict:
    unit = {"status": "pass", "reason": "ok", "finding": ""}
    cell = {"status": "pass", "reason": "ok", "finding": "", "details": [],
            "data": {"single.token_counts": {"image x1": tokens}}, "variants": {"single": unit}}
    return {"schema": SCHEMA, "environment": {"vllm": "0.24.0", "transformers": "5.16.1", "torch": "2.11.0"},
            "checks": ["processor"], "families": {"qwen2_vl": {"title": "Qwen2-VL", "model": "Qwen/Qwen2-VL-2B-Instruct",
                                                                 "checks": {"processor": cell}}}}


class Runner:
    """The action's steps run as a runner would: each step's `run` in bash, its `env` given (the
    `${{ }}` expressions the step's `env` names, resolved here), outputs through $GITHUB_OUTPUT."""

    def __init__(self, work: Path):
        self.work, self.outputs = work, {}
        self.steps = {s.get("id") or s["name"]: s for s in yaml.safe_load(template_text("action"))["runs"]["steps"]}
        stub = work / "stub-bin"
        stub.mkdir()
        # gh: records its arguments; the lookup of an earlier comment answers what `existing` holds
        (stub / "gh").write_text('#!/bin/bash\necho "$*" >> "$WORK/gh-calls"\n'
                                 'case "$*" in *--jq*) cat "$WORK/existing" 2>/dev/null ;; esac\n')
        (stub / "gh").chmod(0o755)
        self.path = f"{stub}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"

    def run(self, name: str, values: dict[str, str]) -> subprocess.CompletedProcess:
        step = self.steps[name]
        assert "${{" not in step["run"], f"{name}: an expression inside a script (use the step's env)"
        env = {"PATH": self.path, "HOME": os.environ.get("HOME", "/tmp"), "WORK": str(self.work),
               "GITHUB_OUTPUT": str(self.work / "output"), "GITHUB_STEP_SUMMARY": str(self.work / "summary"),
               "GITHUB_REPOSITORY": "org/service", "VLCHECK_STORE": "none"}
        for key, expression in (step.get("env") or {}).items():
            env[key] = re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: values[m.group(1)], str(expression))
        (self.work / "output").write_text("")
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=self.work, env=env, capture_output=True, text=True)
        self.outputs[name] = dict(line.split("=", 1) for line in (self.work / "output").read_text().splitlines())
        return done


def test_the_actions_steps_post_one_comment_and_update_it_and_exit_with_the_verdict(tmp_path):
    (tmp_path / "baseline.json").write_text(json.dumps(_report(64)))
    (tmp_path / "candidate.json").write_text(json.dumps(_report(16)))
    runner = Runner(tmp_path)
    values = {"inputs.fail-on": "", "github.server_url": "https://github.com", "github.repository": "org/service",
              "github.run_id": "7", "inputs.github-token": "token", "github.event.pull_request.number": "12"}

    verdict = runner.run("verdict", values)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert runner.outputs["verdict"] == {"verdict": "CHANGED", "exit": "5"}
    comment = (tmp_path / "comment.md").read_text()
    assert comment.startswith(MARKER) and "**vlcheck: CHANGED** (exit 5)" in comment
    assert '"image x1"' in comment and "64" in comment and "16" in comment  # the moved fact, old and new
    assert "https://github.com/org/service/actions/runs/7" in comment
    assert "| verdict | CHANGED (exit 5) |" in (tmp_path / "summary").read_text()

    values |= {f"steps.verdict.outputs.{k}": v for k, v in runner.outputs["verdict"].items()}
    posted = runner.run("Comment on the pull request (one comment, updated in place)", values)
    assert posted.returncode == 0, posted.stderr
    (tmp_path / "existing").write_text("4242\n")  # the next push finds the comment by its marker
    posted = runner.run("Comment on the pull request (one comment, updated in place)", values)
    assert posted.returncode == 0, posted.stderr
    calls = (tmp_path / "gh-calls").read_text().splitlines()
    assert [c.split()[:3] for c in calls if "--jq" not in c] == [
        ["api", "--method", "POST"], ["api", "--method", "PATCH"]]
    assert "repos/org/service/issues/12/comments" in calls[1] and "repos/org/service/issues/comments/4242" in calls[3]
    assert all("body=@comment.md" in c for c in calls if "--method" in c)
    assert all(MARKER in c for c in calls if "--jq" in c)

    decided = runner.run("Decide", values)
    assert decided.returncode == 5 and "vlcheck: CHANGED (exit 5)" in decided.stdout


def test_fail_on_lets_a_verdict_pass_the_check(tmp_path):
    (tmp_path / "baseline.json").write_text(json.dumps(_report(64)))
    (tmp_path / "candidate.json").write_text(json.dumps(_report(16)))
    runner = Runner(tmp_path)
    values = {"inputs.fail-on": "regressed,failing", "github.server_url": "https://github.com",
              "github.repository": "org/service", "github.run_id": "7"}
    assert runner.run("verdict", values).returncode == 0
    assert runner.outputs["verdict"] == {"verdict": "CHANGED", "exit": "0"}


def test_pins_are_read_from_a_requirements_file_and_a_missing_one_is_named(tmp_path):
    assert read_pins(ROOT / ".ci" / "constraints.txt") == {"vllm": "0.24.0", "transformers": "5.16.1", "torch": "2.11.0"}
    pins = tmp_path / "requirements.txt"
    pins.write_text("# served models\nvllm-cpu==0.32.0 ; platform_machine == 'x86_64'\nTransformers == 5.20.2\n")
    assert read_pins(pins) == {"vllm": "0.32.0", "transformers": "5.20.2"}
    pins.write_text("vllm>=0.24\n")
    with pytest.raises(NoPin, match=r"requirements.txt: no exact pin \(name==version\) of vllm"):
        read_pins(pins)
