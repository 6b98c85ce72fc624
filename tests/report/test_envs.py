"""`vlcheck env`'s runs inside an environment, with a stand-in interpreter that records how it was called."""

import os
import stat

from vlcheck.versions import envs


def stand_in_env(tmp_path):
    path = tmp_path / "envs" / "vllm-9.9.9_transformers-resolved_torch-resolved"
    (path / "bin").mkdir(parents=True, exist_ok=True)
    python = path / "bin" / "python"
    python.write_text('#!/bin/sh\necho "$1 bytecode-off=${PYTHONDONTWRITEBYTECODE:-no}" >> "$CALLS"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return envs.Env(path, envs.EnvRequest("9.9.9"), {"vllm": "9.9.9"}, None)


def test_an_environment_writes_its_bytecode_and_is_warmed_once(tmp_path, monkeypatch):
    # uv installs no .pyc; with PYTHONDONTWRITEBYTECODE=1 (set on this machine) every process compiled vLLM,
    # torch and transformers again: a candidate check took 226 s instead of 163 s
    calls = tmp_path / "calls"
    monkeypatch.setenv("CALLS", str(calls))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    env = stand_in_env(tmp_path)
    envs.run_vlcheck(env, ["check"])
    envs.run_vlcheck(env, ["check"])
    assert calls.read_text().splitlines() == ["-c bytecode-off=no", "-m bytecode-off=no", "-m bytecode-off=no"]
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"  # only the environment's processes write it


def test_a_remade_environment_of_a_warmed_release_is_warmed_again(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setenv("CALLS", str(calls))
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    envs.run_vlcheck(stand_in_env(tmp_path), ["check"])
    (stand_in_env(tmp_path).path / "vlcheck-bytecode-written").unlink()  # remade: its bytecode is gone
    envs.run_vlcheck(stand_in_env(tmp_path), ["check"])
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["-c", "-m", "-c", "-m"]
