"""`vlcheck bisect BASELINE.json CANDIDATE.json`: the first release where each finding appears.

A finding is a cell whose behaviour (`measured.behaviour`: outcome, evidence, facts; never its
declaration's label) differs between the baseline's and the candidate's report. For each one:

1. vLLM: with the baseline's transformers, the candidate's vLLM is measured; a finding that is
   there is vLLM's, and the vLLM releases in between are bisected (all such findings at once:
   each release measured splits them) to the first release whose behaviour differs from the
   baseline's: "since vLLM X".
2. transformers: a finding not caused by vLLM alone is bisected over the transformers releases
   with the candidate's vLLM fixed: "since transformers Y (with vLLM V)". Then the baseline's vLLM is
   measured with the candidate's transformers: if the finding is there too it is transformers'
   alone; if not, it is the pairing's (this vLLM with this transformers: neither release alone).

Each step runs `vlcheck check` in a cached environment (`vlcheck env`) for only the families and
checks of the findings still open. Bisection assumes a change, once made, stays: every release
measured is listed with the finding, so a change that comes and goes shows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from vlcheck.gate.measured import CHANGED, LOST, NOT_MEASURED, REGRESSED, SAME, classify, describe_change, digest
from vlcheck.versions.points import Point, Store, ToolFailure, Unmeasurable, version_key


@dataclass
class Finding:
    family: str
    check: str
    kind: str
    """regressed, fixed, changed or lost coverage (`measured.classify`)."""
    change: str
    cause: str = "unknown"
    """vllm, transformers, pairing, or unknown (a point on the way could not be measured)."""
    since_vllm: str | None = None
    last_good_vllm: str | None = None
    since_transformers: str | None = None
    last_good_transformers: str | None = None
    with_vllm: str | None = None
    """The vLLM fixed while transformers was bisected."""
    measured: dict[str, str] = field(default_factory=dict)
    """point name -> how the cell compared with the baseline there (same/regressed/...)."""
    note: str = ""

    @property
    def since(self) -> str:
        if self.cause == "vllm":
            return f"vLLM {self.since_vllm}" + (f" (last good {self.last_good_vllm})" if self.last_good_vllm else "")
        if self.cause in ("transformers", "pairing"):
            text = f"transformers {self.since_transformers} with vLLM {self.with_vllm}"
            return text + (" (not with the baseline's vLLM: the pairing)" if self.cause == "pairing" else
                           " (also with the baseline's vLLM)")
        return "unknown" + (f": {self.note}" if self.note else "")


def final_releases(package: str, lowest: str, highest: str) -> list[str]:
    """The package's final releases from `lowest` to `highest`, from the index (PEP 691 JSON)."""
    index = (os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or "https://pypi.org/simple").rstrip("/")
    req = urllib.request.Request(f"{index}/{package}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            versions = json.load(resp).get("versions", [])
    except (OSError, ValueError) as err:  # no network, an index that is not PEP 691: nothing about the versions
        raise ToolFailure(f"cannot read {package}'s releases from {index} ({err}): name them "
                          f"(--{package}-releases A,B,...)") from err
    finals = [v for v in versions if all(p.isdigit() for p in v.split("."))]
    lo, hi = version_key(lowest), version_key(highest)
    return sorted((v for v in finals if lo <= version_key(v) <= hi), key=version_key)


def findings_between(baseline: dict, candidate: dict) -> list[Finding]:
    out = []
    for family in sorted(set(baseline["families"]) & set(candidate["families"])):
        old_row, new_row = baseline["families"][family]["checks"], candidate["families"][family]["checks"]
        for check in sorted(set(old_row) & set(new_row)):
            a, b = digest(old_row[check], baseline["environment"]), digest(new_row[check], candidate["environment"])
            kind = classify(a, b)
            if kind not in (SAME, NOT_MEASURED):
                out.append(Finding(family, check, kind, describe_change(a, b)))
    return out


class Bisector:
    def __init__(self, store: Store, baseline: dict, log: Callable[[str], None] = print, deadline: float | None = None):
        self.store, self.log, self.deadline = store, log, deadline
        self.base = {(f, c): digest(cell, baseline["environment"])
                     for f, row in baseline["families"].items() for c, cell in row["checks"].items()}

    def changed_at(self, point: Point, findings: list[Finding]) -> dict[int, bool] | None:
        """Per finding (by index): does its cell at `point` differ from the baseline's? None: unmeasurable."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimeoutError(f"time budget spent before {point}")
        try:
            self.store.measure(point, {f.family for f in findings}, {f.check for f in findings})
        except Unmeasurable as err:
            self.log(f"  {point} cannot be measured: {str(err).splitlines()[0][:200]}")
            return None
        out = {}
        for i, f in enumerate(findings):
            label = classify(self.base.get((f.family, f.check)), self.store.cell(point, f.family, f.check))
            f.measured[point.name] = label
            out[i] = label != SAME
        return out

    def first_change(self, points: list[Point], findings: list[Finding]) -> dict[int, tuple[Point, Point]]:
        """points[0] behaves as the baseline for every finding, points[-1] does not: for each finding
        (by index) the last point as the baseline and the first that differs, measuring as few as can be."""
        if not findings:
            return {}
        if len(points) <= 2:
            return {id(f): (points[0], points[-1]) for f in findings}
        inner = points[1:-1]
        # a release already measured for these cells (the matrix's, an earlier bisect) costs nothing
        have = [p for p in inner if all(self.store.cell(p, f.family, f.check) for f in findings)]
        mid = min(have or inner, key=lambda p: abs(inner.index(p) - len(inner) // 2))
        verdicts = self.changed_at(mid, findings)
        if verdicts is None:  # drop the release that does not install and try the next one
            return self.first_change([p for p in points if p != mid], findings)
        moved = [f for i, f in enumerate(findings) if verdicts[i]]
        stayed = [f for i, f in enumerate(findings) if not verdicts[i]]
        cut = points.index(mid)
        return {**self.first_change(points[:cut + 1], moved), **self.first_change(points[cut:], stayed)}


def bisect(baseline: dict, candidate: dict, store: Store, vllm_releases: list[str], transformers_releases: list[str],
           log: Callable[[str], None] = print, budget_s: float | None = None,
           families: set[str] | None = None, sources: tuple[str, str] = ("baseline", "candidate")) -> list[Finding]:
    findings = [f for f in findings_between(baseline, candidate) if families is None or f.family in families]
    v0, t0 = baseline["environment"]["vllm"], baseline["environment"]["transformers"]
    v1, t1 = candidate["environment"]["vllm"], candidate["environment"]["transformers"]
    for point, report, source in ((Point(v0, t0), baseline, sources[0]), (Point(v1, t1), candidate, sources[1])):
        if not any(run.get("source") == source for run in store.points.get(point, {}).get("runs", [])):
            store.add_report(point, report, {"whole": True}, source=source)
    log(f"{len(findings)} finding(s) between {Point(v0, t0)} and {Point(v1, t1)}")
    bis = Bisector(store, baseline, log, time.monotonic() + budget_s if budget_s else None)
    try:
        _bisect(bis, findings, v0, t0, v1, t1, vllm_releases, transformers_releases, log)
    except TimeoutError as err:
        log(f"stopped: {err}; the findings not placed say 'unknown'")
        for f in findings:
            if f.cause == "unknown" and not f.note:
                f.note = "time budget spent"
    return findings


def _bisect(bis: Bisector, findings: list[Finding], v0, t0, v1, t1, vllm_releases, transformers_releases, log) -> None:
    open_ = list(findings)
    if v0 != v1:
        at_candidate_vllm = bis.changed_at(Point(v1, t0), open_) if t0 != t1 else {i: True for i in range(len(open_))}
        if at_candidate_vllm is None:
            for f in open_:
                f.note = f"{Point(v1, t0)} cannot be measured"
        else:
            by_vllm = [f for i, f in enumerate(open_) if at_candidate_vllm[i]]
            axis = [Point(v, t0) for v in vllm_releases if version_key(v0) <= version_key(v) <= version_key(v1)]
            log(f"vLLM: {len(by_vllm)} finding(s) appear with transformers {t0}; bisecting {len(axis)} releases")
            places = bis.first_change(axis, by_vllm)
            for f in by_vllm:
                good, bad = places[id(f)]
                f.cause, f.since_vllm, f.last_good_vllm = "vllm", bad.vllm, good.vllm
            open_ = [f for f in open_ if f.cause == "unknown"]
    if t0 != t1 and open_:
        axis = [Point(v1, t) for t in transformers_releases if version_key(t0) <= version_key(t) <= version_key(t1)]
        log(f"transformers: {len(open_)} finding(s) with vLLM {v1}; bisecting {len(axis)} releases")
        places = bis.first_change(axis, open_)
        for f in open_:
            good, bad = places[id(f)]
            f.since_transformers, f.last_good_transformers, f.with_vllm = bad.transformers, good.transformers, v1
        if v0 != v1:
            alone = bis.changed_at(Point(v0, t1), open_)
            for i, f in enumerate(open_):
                f.cause = "unknown" if alone is None else ("transformers" if alone[i] else "pairing")
                if alone is None:
                    f.note = f"{Point(v0, t1)} cannot be measured"
        else:
            for f in open_:
                f.cause = "transformers"


def to_text(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.family} {f.check} [{f.kind}] since {f.since}\n    {f.change}"
                     + f"\n    measured: {', '.join(f'{k}={v}' for k, v in f.measured.items())}")
    counts = {}
    for f in findings:
        counts[f.cause] = counts.get(f.cause, 0) + 1
    lines.append(f"{len(findings)} finding(s): " + ", ".join(f"{n} {c}" for c, n in sorted(counts.items())))
    return "\n".join(lines) + "\n"


NOT_PLACED = 3
"""Some findings have no first release: no verdict on them, as the diff's INCONCLUSIVE (3)."""
EXIT_CODES = [
    (0, "placed", "every finding placed: its first release named"),
    (NOT_PLACED, "inconclusive", "some findings not placed (a point could not be measured, or the budget was spent), or "
                        "measuring stopped: an environment could not be made for a reason not the versions' (uv "
                        "missing, no network, a full disk)"),
]
"""`vlcheck bisect`'s own exit codes (2 bad input or usage and 1 a crash are every command's: `vlcheck.cli.main`)."""


def load_report(path: str) -> dict:
    """A `vlcheck check --json` report that names its versions; ReportError (bad input) otherwise."""
    from vlcheck.gate.diff import ReportError, load

    report = load(path, known_statuses=False)
    missing = [k for k in ("vllm", "transformers") if not report["environment"].get(k)]
    if missing:
        raise ReportError(f"{path}: environment: {' and '.join(missing)} missing (a measured point names both)")
    if not isinstance(report.get("summary"), dict):
        raise ReportError(f"{path}: summary: missing (is it the --json output of `vlcheck check`?)")
    return report


def cmd_bisect(args: argparse.Namespace) -> int:
    baseline, candidate = load_report(args.baseline), load_report(args.candidate)
    b_env, c_env = baseline["environment"], candidate["environment"]
    vllm = args.vllm_releases.split(",") if args.vllm_releases else final_releases("vllm", b_env["vllm"], c_env["vllm"])
    tf = (args.transformers_releases.split(",") if args.transformers_releases else
          final_releases("transformers", *sorted((b_env["transformers"], c_env["transformers"]), key=version_key)))
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    store = Store(Path(args.store), log)
    started = time.monotonic()
    findings = bisect(baseline, candidate, store, vllm, tf, log, args.budget, set(args.family) if args.family else None,
                      (Path(args.baseline).name, Path(args.candidate).name))
    print(to_text(findings), end="")
    print(f"bisect took {time.monotonic() - started:.0f} s; measurements in {args.store}")
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(f), "since": f.since} for f in findings], indent=1) + "\n")
    return 0 if all(f.cause != "unknown" for f in findings) else NOT_PLACED


def register(sub) -> None:
    p = sub.add_parser(
        "bisect", help="find the first vLLM (and transformers) release of each finding between a baseline report and "
                   "a candidate's",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("baseline", metavar="BASELINE",
                   help="the baseline: `vlcheck check --json` on the versions you run today")
    p.add_argument("candidate", metavar="CANDIDATE", help="the candidate's report: `vlcheck check --json` on the upgrade")
    p.add_argument("--family", action="append", metavar="NAME", help="only findings of these families (repeatable)")
    p.add_argument("--vllm-releases", metavar="A,B,...", help="the vLLM releases to bisect over (default: the index's)")
    p.add_argument("--transformers-releases", metavar="A,B,...", help="the transformers releases (default: the index's)")
    p.add_argument("--matrix-data", dest="store", default="vlcheck-bisect", metavar="DIR",
                   help="the folder of measured points, reused across runs (default: %(default)s; the matrix's "
                        "folder, `--matrix-data compat`, reuses its points)")
    p.add_argument("--store", dest="store", help=argparse.SUPPRESS)  # the former name (not the result store)
    p.add_argument("--budget", type=float, metavar="SECONDS", help="stop measuring after this long")
    p.add_argument("--json", metavar="FILE", help="also write the findings with their 'since' as JSON")
    p.set_defaults(func=cmd_bisect)
