"""The engine tier on vLLM's CPU build (`vlcheck tier cpu-engine`): JOBS pytest processes side by side,
each serving whole families (`--vlcheck-shard i/JOBS`: a family-config's one engine serves all of its
tests), one engine at a time, taken from one queue as each process becomes free, longest first by
this tier's measured durations (`--vlcheck-shard-claims`: a fixed split left one shard 158 s behind
the other). Then a table per family-config (engine start, outcomes, agreement with transformers),
the configurations' table, and the engine cells as a vlcheck report (`report.json`, the input of
`vlcheck diff` between two ends), from the same run. Where this environment lacks the CPU build, its
own environment is made first (`cpu_engine_env`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from vlcheck.runners.cpu_engine_env import (
    TierError,
    default_env_dir,
    has_cpu_build,
    make_environment,
    pins_of,
    this_environments_pins,
)


def run_tier(python: str | Path, jobs: int, out: Path, families: list[str], extra: list[str], log=print) -> int:
    """The tier's shards in `python`'s environment; 0 when every shard passed."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("shard-*.xml"), *out.glob("shard-*.log"), *out.glob("report*.json")]:
        old.unlink()
    shutil.rmtree(out / "claims", ignore_errors=True)
    where = subprocess.run([str(python), "-c", "import os, vlcheck.runners as r, vlcheck.runners.tier.engine as t; "
                            "print(os.path.dirname(t.__file__)); print(os.path.dirname(r.__file__))"],
                           capture_output=True, text=True)
    if where.returncode != 0:
        raise TierError(f"{python}: vlcheck does not import there:\n{where.stderr.strip()[-1000:]}")
    engine_tests, runners = where.stdout.split()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env.setdefault("OMP_NUM_THREADS", "1")
    chosen = [w for name in families for w in ("--vlcheck-family", name)]
    began, cpu_before = time.monotonic(), os.times()
    shards = []
    for i in range(1, jobs + 1):
        cmd = [str(python), "-m", "pytest", "-m", "cpu_engine", "-n", "0", "-p", "no:cacheprovider", "-v", "-rfEsxX",
               "--vlcheck-shard", f"{i}/{jobs}", "--vlcheck-shard-durations", f"{runners}/cpu_engine_durations.json",
               "--vlcheck-shard-claims", str(out / "claims"), f"--junitxml={out}/shard-{i}.xml",
               "--vlcheck-engine-report", str(out / f"report-{i}.json"), *chosen, *extra, engine_tests]
        log_file = open(out / f"shard-{i}.log", "w")  # noqa: SIM115 - closed when the shard ends
        shards.append((subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env), log_file))
    rc = 0
    for i, (proc, log_file) in enumerate(shards, 1):
        code = proc.wait()
        log_file.close()
        last = (out / f"shard-{i}.log").read_text(errors="replace").strip().splitlines()[-1:] or [""]
        log(f"shard {i}/{jobs}: exit {code}: {last[0]}")
        rc |= code != 0  # pytest: 0 all passed, 1 some failed, 5 nothing collected (the tier did not run)
    from vlcheck.runners import engine_tier

    table = engine_tier.tables([p.read_bytes() for p in sorted(out.glob("shard-*.xml"))])
    (out / "table.md").write_text(table + "\n")
    log(table)
    reports = sorted(out.glob("report-*.json"))
    if reports:
        merged = subprocess.run([str(python), "-m", "vlcheck.cli", "merge", *map(str, reports), "-o",
                                 str(out / "report.json"), "--markdown", str(out / "report.md")],
                                capture_output=True, text=True)
        rc |= merged.returncode != 0
    cpu_after = os.times()
    cpu = (cpu_after.children_user - cpu_before.children_user) + (cpu_after.children_system - cpu_before.children_system)
    # CPU time next to wall time: on a shared machine the wall time says more about the neighbours
    log(f"cpu engine tier: {time.monotonic() - began:.0f} s wall, {cpu:.0f} s CPU (user+sys of the pytest processes), "
        f"JOBS={jobs}, load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return int(rc)


def main(args, extra: list[str]) -> int:
    try:
        if args.env is None and args.constraints is None and has_cpu_build(sys.executable):
            python: str | Path = sys.executable
        else:
            pins = pins_of(Path(args.constraints)) if args.constraints else this_environments_pins()
            venv = Path(args.env) if args.env else default_env_dir(pins)
            python = make_environment(venv, pins, Path(args.constraints) if args.constraints else None)
        if args.make_only:
            return 0
        jobs = min(args.jobs, len(args.family)) if args.family else args.jobs  # a shard with no family idles
        return run_tier(python, jobs, Path(args.out), args.family or [], extra)
    except TierError as err:
        print(f"vlcheck tier cpu-engine: {err}", file=sys.stderr)
        return 2
