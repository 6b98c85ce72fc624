"""Two environments on one machine, interleaved: one worker process each (`worker.py`), asked for
the same family-config one after the other, in ABBA order over the rounds so that neither side is
always first (a machine that warms up or heats up would otherwise favour one); and that in several
sessions of fresh workers, because a process's speed is its own."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from vlcheck.core.devices import same_machine
from vlcheck.speed.rule import Comparison, compare


class WorkerFailed(RuntimeError):
    """An environment's worker could not start or stopped answering: the message names the environment."""


def python_of(env: Path) -> Path:
    """The Python of a virtual environment (a folder), or the interpreter itself. The worker runs as
    `python -m vlcheck.cli`: a copied environment's console scripts still name the original's Python."""
    python = env if env.is_file() else env / "bin" / "python"
    if not python.exists():
        raise WorkerFailed(f"{env}: no bin/python here (a virtual environment with vlcheck installed: "
                           "`vlcheck env` makes one per version pair)")
    return python


class Worker:
    def __init__(self, label: str, env: Path, served: bool = False):
        """Spec folders reach the worker through $VLCHECK_SPEC_PATH, which it inherits."""
        self.label, self.env = label, env
        argv = [str(python_of(env)), "-m", "vlcheck.cli", "speed", "worker", *(["--served"] if served else [])]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.hello = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise WorkerFailed(f"{self.label} ({self.env}): the worker exited ({code}) without answering; run "
                               f"`{python_of(self.env)} -m vlcheck.cli speed worker` to see why")
        return json.loads(line)

    def ask(self, family: str, variant: str, repeats: int) -> dict:
        self.process.stdin.write(json.dumps({"family": family, "variant": variant, "repeats": repeats}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class ConfigResult:
    family: str
    variant: str
    session_medians: dict[str, dict[str, list[float]]] = field(default_factory=lambda: {"baseline": {}, "candidate": {}})
    """Per side, per metric: each session's median (of its rounds' medians) seconds per call."""
    skip: dict[str, str] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        verdicts = {c.verdict for c in self.comparisons}
        for v in ("SLOWER", "FASTER", "same", "undecided"):
            if v in verdicts:
                return v
        return "skip"

    def to_json(self) -> dict:
        return {"family": self.family, "variant": self.variant, "verdict": self.verdict, "skip": self.skip,
                "comparisons": [c.to_json() for c in self.comparisons], "session_medians": self.session_medians}


def run(baseline: Path, candidate: Path, configs: list[tuple[str, str]], sessions: int, rounds: int, repeats: int,
        progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr), served: bool = False) -> dict:
    """`sessions` pairs of fresh workers, one after the other, each asked `rounds` rounds: a process's
    own speed differs from the next one's (measured: the same environment's processor 25% apart in two
    processes, steady within each), so the noise is measured between sessions, not within one."""
    start = time.monotonic()
    results = {c: ConfigResult(*c) for c in configs}
    hellos: dict[str, dict] = {}
    for s in range(sessions):
        sides = ("baseline", "candidate") if s % 2 == 0 else ("candidate", "baseline")
        paths = {"baseline": baseline, "candidate": candidate}
        workers = {side: Worker(side, paths[side], served=served) for side in sides}
        try:
            hellos = {side: w.hello for side, w in workers.items()}
            session: dict = {}
            for r in range(rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                for family, variant in configs:
                    for side in order:
                        answer = workers[side].ask(family, variant, repeats)
                        if "skip" in answer:
                            results[(family, variant)].skip[side] = answer["skip"]
                            continue
                        for metric, why in answer.get("not_timed", {}).items():
                            results[(family, variant)].skip[f"{side} {metric}"] = why
                        for metric, samples in answer["timings"].items():
                            session.setdefault((family, variant, side, metric), []).append(statistics.median(samples))
        finally:
            for w in workers.values():
                w.close()
        for (family, variant, side, metric), medians in session.items():
            results[(family, variant)].session_medians[side].setdefault(metric, []).append(statistics.median(medians))
        progress(f"session {s + 1}/{sessions} done ({time.monotonic() - start:.0f} s)")
    for result in results.values():
        measured = result.session_medians
        for metric in measured["baseline"]:
            if metric in measured["candidate"]:
                result.comparisons.append(compare(metric, measured["baseline"][metric], measured["candidate"][metric]))
    same = same_machine(hellos["baseline"]["machine"], hellos["candidate"]["machine"])
    return {"environments": {side: {"path": str(p), **hellos[side]} for side, p in
                             (("baseline", baseline), ("candidate", candidate))},
            "same_machine": same, "sessions": sessions, "rounds": rounds, "repeats": repeats,
            "seconds": round(time.monotonic() - start, 1),
            "family_configs": [r.to_json() for r in results.values()]}


def slower(report: dict) -> list[str]:
    """The family-configs a report finds slower, with the metric and ratio."""
    return [f"{r['family']}-{r['variant']}: {c['metric']} x{c['ratio']} (beyond x{c['threshold']})"
            for r in report["family_configs"] for c in r["comparisons"] if c["verdict"] == "SLOWER"]
