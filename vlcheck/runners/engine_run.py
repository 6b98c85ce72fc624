"""`vlcheck check --gpu` / `--cpu-engine`: the engine tier run for the report.

The report's engine cells are the shipped engine tests' own (`engine_cells`), run by pytest in a
process of their own (engines start and stop there, as in `vlcheck tier`), so `vlcheck check
--gpu` and `pytest -m gpu` cannot disagree about a model: there is one definition of each check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from vlcheck.core.results import CheckResult


class EngineTierUnavailable(RuntimeError):
    """The tier cannot run here (pytest missing); the message says what to install."""


def engine_tests() -> str:
    import vlcheck.runners.tier.engine as tier

    return os.path.dirname(tier.__file__)


GPU_DEFAULT_CONFIGURATIONS = ("defaults",)
"""What the GPU runs (`vlcheck tier gpu`, `vlcheck check --gpu`) add to the eager tests where no
configuration is chosen: the engine users get from `vllm serve MODEL`
(vlcheck/configurations/vllm_defaults.py). Choosing `eager` runs the eager tests alone."""
GPU_SERVED = ("all",)
"""Every family-config's engine on a GPU also serves vLLM's OpenAI app for the served checks: one
engine start serves both. On vLLM's CPU build a served engine costs minutes, so none is served there."""


def configuration_args(platform: str, configs: list[str]) -> list[str]:
    """The pytest options choosing the configurations run beside the eager tests: on GPUs
    `GPU_DEFAULT_CONFIGURATIONS` unless some are chosen. Every GPU runner takes them from here, so
    `vlcheck check --gpu` and `vlcheck tier gpu` give the same cells."""
    if platform == "gpu":
        configs = configs or list(GPU_DEFAULT_CONFIGURATIONS)
    return [w for name in configs for w in ("--vlcheck-config", name)]


def serve_args(platform: str) -> list[str]:
    return [w for name in GPU_SERVED for w in ("--vlcheck-serve", name)] if platform == "gpu" else []


def command(platform: str, families: list[str], configs: list[str], weights: str, report: Path) -> list[str]:
    marker = "gpu" if platform == "gpu" else "cpu_engine"
    return [sys.executable, "-m", "pytest", "-m", marker, "-p", "no:cacheprovider", "-q", "-rfEsxX",
            "--vlcheck-engine-report", str(report), "--vlcheck-weights", weights,
            *(w for name in families for w in ("--vlcheck-family", name)),
            *serve_args(platform), *configuration_args(platform, configs), engine_tests()]


def run(platform: str, families: list[str], configs: list[str], weights: str,
        echo=sys.stderr) -> tuple[list[CheckResult], list[str], dict[str, list[str]]]:
    """(results, the checks in order, their informational facts) of the engine tier on `families`."""
    import importlib.util

    if importlib.util.find_spec("pytest") is None:
        raise EngineTierUnavailable("the engine checks are the engine tier's tests: install pytest "
                                    "(`pip install 'vlcheck[test]'`)")
    from vlcheck.gate.report import result_of

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "engine-report.json"
        try:  # pytest's progress as it comes, on a long run
            out = echo.fileno()
        except (AttributeError, OSError, ValueError):
            out = subprocess.PIPE
        done = subprocess.run(command(platform, families, configs, weights, report), stdout=out, stderr=subprocess.STDOUT,
                              text=True, check=False)
        if done.stdout:
            echo.write(done.stdout)
        if not report.exists():
            raise EngineTierUnavailable(f"the engine tier wrote no cells (pytest exit {done.returncode}): its output "
                                        "above says why")
        rep = json.loads(report.read_text())
    results = [result_of(family, check, cell) for family, row in rep["families"].items()
               for check, cell in row["checks"].items()]
    return results, list(rep["checks"]), dict(rep.get("informational", {}))
