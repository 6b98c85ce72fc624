"""Measurements at (vLLM, transformers) points: `vlcheck check` run in a cached environment per point,
only the families and checks asked for, kept as digests (`measured.digest`) that bisect and the
matrix compare. Full reports stay in the run folder; the digests are what a matrix commits.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from vlcheck.gate.causes import PointIndex
from vlcheck.gate.measured import digest
from vlcheck.versions import envs


@dataclass(frozen=True, order=True)
class Point:
    vllm: str
    transformers: str

    @property
    def name(self) -> str:
        return f"vllm-{self.vllm}_transformers-{self.transformers}"

    def __str__(self) -> str:
        return f"vLLM {self.vllm} + transformers {self.transformers}"


def version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+]", version))


class Unmeasurable(RuntimeError):
    """The point cannot be measured: its environment does not install, or vlcheck did not write a report."""


class ToolFailure(RuntimeError):
    """vlcheck could not make an environment for a reason that is not the point's (uv missing, no
    network, a full disk): the run stops, and nothing is recorded about the point."""


class Store:
    """Digests per point, in `root/points/<point>.json`; full reports and logs in `root/runs/`."""

    def __init__(self, root: Path, log: Callable[[str], None] = print):
        self.root = Path(root)
        self.log = log
        self.points: dict[Point, dict] = {}
        for path in sorted((self.root / "points").glob("*.json")):
            data = json.loads(path.read_text())
            self.points[Point(data["point"]["vllm"], data["point"]["transformers"])] = data

    def cell(self, point: Point, family: str, check: str) -> dict | None:
        return self.points.get(point, {}).get("cells", {}).get(family, {}).get(check)

    def unmeasurable(self, point: Point) -> str | None:
        return self.points.get(point, {}).get("unmeasurable")

    def measured(self, point: Point) -> dict[str, dict[str, dict]]:
        return self.points.get(point, {}).get("cells", {})

    def add_report(self, point: Point, report: dict, seconds: dict | None = None, source: str = "") -> None:
        """Digest a `vlcheck check --json` report into the point (cells already there are replaced)."""
        env = report["environment"]
        saved = self.root / "points" / f"{point.name}.json"
        if saved.exists():  # another runner may have added to this point since it was read
            self.points[point] = json.loads(saved.read_text())
        data = self.points.setdefault(point, {"point": {"vllm": point.vllm, "transformers": point.transformers},
                                              "cells": {}, "runs": []})
        data["environment"] = {k: env.get(k) for k in ("vllm", "transformers", "torch", "huggingface_hub", "python")}
        data.pop("unmeasurable", None)
        for family, row in report["families"].items():
            for check, cell in row["checks"].items():
                data["cells"].setdefault(family, {})[check] = digest(
                    cell, env, report.get("informational", {}).get(check, ()))
        data["runs"].append({"families": len(report["families"]), "checks": report["checks"],
                             "summary": report["summary"], "source": source, **(seconds or {})})
        self._save(point)

    def redigest(self) -> list[str]:
        """Digest every point again from its full reports in `runs/` (after the comparison rules
        changed); returns the reports that are missing (their cells are kept as they were)."""
        missing = []
        for point, data in self.points.items():
            for run in data.get("runs", []):
                path = self.root / "runs" / run.get("source", "")
                if not run.get("source") or not path.is_file():
                    missing.append(f"{point.name}: {run.get('source')}")
                    continue
                report = json.loads(path.read_text())
                for family, row in report["families"].items():
                    for check, cell in row["checks"].items():
                        data["cells"].setdefault(family, {})[check] = digest(
                            cell, report["environment"], report.get("informational", {}).get(check, ()))
            self._save(point)
        return missing

    def _save(self, point: Point) -> None:
        (self.root / "points").mkdir(parents=True, exist_ok=True)
        data = self.points[point]
        data["cells"] = dict(sorted(data["cells"].items()))
        (self.root / "points" / f"{point.name}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")

    def measure(self, point: Point, families: Iterable[str] | None = None, checks: Iterable[str] | None = None,
                torch: str | None = None) -> dict[str, dict[str, dict]]:
        """Run `vlcheck check` at the point for the families and checks not measured there yet.
        Several processes may share the folder: one measures a point at a time (`<point>.lock`)."""
        lock = self.root / "points" / f"{point.name}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        while True:
            if self._satisfied(point, families, checks):
                return self.measured(point)
            try:
                with open(lock, "x") as f:
                    f.write(f"{os.getpid()}\n")
                break
            except FileExistsError:
                time.sleep(15)
        try:
            return self._measure(point, families, checks, torch)
        finally:
            lock.unlink(missing_ok=True)

    def _satisfied(self, point: Point, families, checks) -> bool:
        saved = self.root / "points" / f"{point.name}.json"
        if saved.exists():  # another process may have measured it meanwhile
            self.points[point] = json.loads(saved.read_text())
        if self.unmeasurable(point):
            raise Unmeasurable(self.unmeasurable(point))
        have = self.measured(point)
        if any(run.get("whole") for run in self.points.get(point, {}).get("runs", [])):
            return True  # every family and check was measured there
        runs = self.points.get(point, {}).get("runs", [])
        checks = checks or sorted({c for run in runs for c in run.get("checks", [])})  # every check: as run there
        return families is not None and bool(checks) and all(c in have.get(f, {}) for f in families for c in checks)

    def _measure(self, point: Point, families, checks, torch) -> dict[str, dict[str, dict]]:
        families = sorted(families) if families is not None else None
        checks = sorted(checks) if checks is not None else None
        try:
            env = envs.ensure(envs.EnvRequest(point.vllm, point.transformers, torch), log=self.log)
        except envs.EnvError as err:
            if not err.no_solution:
                raise ToolFailure(f"{point}: {err}") from err
            self.points[point] = {"point": {"vllm": point.vllm, "transformers": point.transformers},
                                  "cells": {}, "runs": [], "unmeasurable": str(err)[:2000]}
            self._save(point)
            raise Unmeasurable(str(err)) from err
        runs = self.root / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        stamp = f"{point.name}.{int(time.time())}"
        report_path = runs / f"{stamp}.json"
        argv = ["check", "--json", str(report_path)]
        argv += [a for f in families or () for a in ("--family", f)]
        argv += [a for c in checks or () for a in ("--check", c)]
        what = f"{len(families)} families" if families is not None else "every family"
        what += f", checks {', '.join(checks)}" if checks is not None else ", every check"
        self.log(f"measuring {point}: {what}")
        started = time.monotonic()
        with open(runs / f"{stamp}.log", "w") as out:
            proc = envs.run_vlcheck(env, argv, stdout=out, stderr=out)
        check_s = round(time.monotonic() - started, 1)
        if not report_path.exists():
            raise Unmeasurable(f"{point}: vlcheck check exited {proc.returncode} without a report "
                               f"(log: {runs / (stamp + '.log')})")
        report = json.loads(report_path.read_text())
        self.add_report(point, report, {"env_s": env.created_s if env.created_s is not None else env.reused_s,
                                        "env_made": env.created_s is not None, "check_s": check_s,
                                        "whole": families is None and checks is None, "exit": proc.returncode},
                        source=report_path.name)
        self.log(f"  {point}: {', '.join(f'{n} {s}' for s, n in report['summary'].items() if n)} "
                 f"(environment {'made' if env.created_s is not None else 'reused'} in "
                 f"{env.created_s if env.created_s is not None else env.reused_s} s, check {check_s} s)")
        return self.measured(point)


def point_index(root: str | Path | None, old_env: dict, new_env: dict) -> PointIndex | None:
    """The matrix's measured points in `root` (`root/points/*.json`) as the diff's causes read them
    (each cause's first bad release); None without a matrix there."""
    if not root or not (Path(root) / "points").is_dir():
        return None
    return PointIndex(Store(Path(root), log=lambda _: None), version_key, old_env, new_env)
