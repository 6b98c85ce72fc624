"""scripts/gpu-tier.sh's spreading over GPUs, on CPU: pytest is replaced by a stand-in that records
which GPUs each family-config process saw and when it ran."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
REPO = Path(__file__).resolve().parents[2]
FAMILIES = "paligemma llava qwen2_vl"  # 5 family-configs
STAND_IN = """#!/usr/bin/env bash
# `timeout SECS python3 -m pytest ... --vlcheck-family F --vlcheck-variant K ...`, recorded, not run
args=" $* "; family=${args#* --vlcheck-family }; kind=${args#* --vlcheck-variant }
echo "${family%% *}-${kind%% *} $CUDA_VISIBLE_DEVICES start $(date +%s.%N)" >> "$STAND_IN_LOG"
sleep 0.4
echo "${family%% *}-${kind%% *} $CUDA_VISIBLE_DEVICES end $(date +%s.%N)" >> "$STAND_IN_LOG"
echo "1 passed in 0.4s"
"""


def _run_tier(tmp_path, gpus, jobs, *pytest_args, shard=None):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "timeout").write_text(STAND_IN)
    (bin_dir / "timeout").chmod(0o755)
    log, out = tmp_path / "runs.log", tmp_path / "out"
    # the script's python3 must be this interpreter (its venv), activated or not
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}", "STAND_IN_LOG": str(log), "OUT": str(out),
           "GPUS": gpus, "JOBS": str(jobs), "FAMILIES": FAMILIES, "SHARD": shard or "",
           # the stand-in serves nothing: no shared render fork server (a vLLM import) for it
           "VLCHECK_RENDER_FORK_SERVER": str(tmp_path / "no-fork-server.sock")}
    done = subprocess.run(["bash", str(REPO / "scripts" / "gpu-tier.sh"), *pytest_args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = {}
    for line in log.read_text().splitlines():
        config, devices, event, at = line.split()
        runs.setdefault(config, {"gpus": devices})[event] = float(at)
    return runs, out


def _most_at_once(runs, gpu):
    events = sorted((r[e], +1 if e == "start" else -1) for r in runs.values() if gpu in r["gpus"].split(",")
                    for e in ("start", "end"))
    level = peak = 0
    for _, step in sorted(events, key=lambda x: (x[0], x[1])):
        level += step
        peak = max(peak, level)
    return peak


def test_family_configs_spread_over_every_gpu_with_jobs_per_gpu(tmp_path):
    runs, out = _run_tier(tmp_path, "3 5", 2)
    assert len(runs) == 5 and all({"start", "end"} <= r.keys() for r in runs.values())
    assert {r["gpus"] for r in runs.values()} == {"3", "5"}  # device ids as given, one each
    assert _most_at_once(runs, "3") == 2 and _most_at_once(runs, "5") == 2  # JOBS side by side, never more
    summary = (out / "summary.txt").read_text().splitlines()
    assert len([line for line in summary if " rc=0 " in line]) == 5 and "GPUs 3 5" in summary[-1]
    table = (out / "table.md").read_text()  # the closing table: a row per family-config
    assert len([line for line in table.splitlines() if line.startswith("| ") and line.endswith(" | 0 |")]) == 5
    with tarfile.open(out / "logs.tgz") as tar:
        assert len([n for n in tar.getnames() if n.endswith(".log") and "build" not in n]) == 5


def test_a_family_config_needing_two_gpus_gets_two(tmp_path):
    runs, _ = _run_tier(tmp_path, "0 1", 1, "--vlcheck-tp", "2")
    assert {r["gpus"] for r in runs.values()} == {"0,1"}
    assert _most_at_once(runs, "0") == 1  # one slot per GPU: the five ran one after another


def test_shards_of_the_tier_run_every_family_config_once(tmp_path):
    (tmp_path / "1").mkdir(), (tmp_path / "2").mkdir()
    first, _ = _run_tier(tmp_path / "1", "0", 4, shard="1/2")
    second, _ = _run_tier(tmp_path / "2", "0", 4, shard="2/2")
    assert first and second and not first.keys() & second.keys() and len({*first, *second}) == 5


def test_a_configuration_on_two_gpus_gets_two_and_one_on_one_gpu_gets_one(tmp_path):
    (tmp_path / "tp2").mkdir(), (tmp_path / "chunked").mkdir()
    sharded, _ = _run_tier(tmp_path / "tp2", "0 1", 1, "--vlcheck-config", "tp2")
    assert {r["gpus"] for r in sharded.values()} == {"0,1"}
    single, _ = _run_tier(tmp_path / "chunked", "0 1", 1, "--vlcheck-config", "chunked")
    assert {r["gpus"] for r in single.values()} == {"0", "1"}
