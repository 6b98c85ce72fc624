"""`vlcheck matrix`: which vLLM releases work with which transformers releases, per family.

The grid is vLLM releases (rows) x transformers releases (columns), every cell compared with the
reference point (the lowest of both: the pinned reference) by behaviour (`measured.classify`).
It is measured by bisection, not cell by cell:

1. the priority points (`--priority-vllm` x `--priority-transformers`, the ends first), every
   family and check;
2. then, along each measured line (a row or a column), between two measured neighbours where a
   family's behaviour differs, the release in the middle, for those families only, until the
   neighbours are adjacent releases or the time budget is spent.

A cell not measured is inferred where its nearest measured neighbours on its row (else its
column) agree for that family, and marked so; otherwise it is unknown. The measurements
(`points/*.json`, one digest per family and check) are the data the Markdown tables and the HTML
page are generated from (`vlcheck matrix report`), and the evidence each cell links to.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from vlcheck.gate.measured import classify
from vlcheck.spec.registry import all_families
from vlcheck.versions.grid import AXES_FILE, Axes, Grid, _coord
from vlcheck.versions.points import Point, Store, Unmeasurable, version_key


def plan(grid: Grid, only: list[str] | None = None) -> Iterator[tuple[Point, list[str] | None]]:
    """The measurements still wanted, best first: (point, families, or None for every family).

    1. the anchors, every family: the four corners of the priority releases (their ends);
    2. along each line through the priority releases (vLLM's at each priority transformers, and
       transformers' at each priority vLLM), between two known cells of a family that differ, the
       release in the middle (a priority release if one lies between), for that family;
    3. the other priority points, for the families that differ anywhere measured (the others are
       inferred from the anchors), then 2 again."""
    axes = grid.axes
    pv, pt = axes.priority_vllm, axes.priority_transformers
    for t in dict.fromkeys((pt[0], pt[-1])):
        for v in dict.fromkeys((pv[0], pv[-1])):
            p = Point(v, t)
            if not grid.store.unmeasurable(p) and _missing(grid, p, only):
                yield p, only
    yield from _bisections(grid, only)
    moving = only or _differing_families(grid)
    for t in pt:
        for v in pv:
            p = Point(v, t)
            wanted = [f for f in moving if grid.state(p, f) is None]
            if wanted and not grid.store.unmeasurable(p):
                yield p, wanted
    yield from _bisections(grid, only)


def _missing(grid: Grid, point: Point, only: list[str] | None) -> bool:
    if only is None:
        return not any(run.get("whole") for run in grid.store.points.get(point, {}).get("runs", []))
    return any(grid.state(point, f) is None for f in only)


def _differing_families(grid: Grid) -> list[str]:
    """Families whose cells differ between any two points measured for them."""
    out = []
    for family in grid.families:
        keys = {json.dumps({c: s[c]["key"] for c in s}, sort_keys=True)
                for p in grid.store.points if (s := grid.state(p, family)) is not None}
        if len(keys) > 1:
            out.append(family)
    return out


def _bisections(grid: Grid, only: list[str] | None) -> Iterator[tuple[Point, list[str]]]:
    axes = grid.axes
    lines = []
    if len(axes.priority_vllm) > 1:
        lines += [(Point(axes.vllm[0], t), "vllm") for t in axes.priority_transformers]
    if len(axes.priority_transformers) > 1:
        lines += [(Point(v, axes.transformers[0]), "transformers") for v in axes.priority_vllm]
    for start, along in lines:
        line = grid._line(start, along)
        priority = set(axes.priority_vllm if along == "vllm" else axes.priority_transformers)
        for family in (only or grid.families):
            known = [(p, state) for p in line if not grid.store.unmeasurable(p)
                     and (state := grid.cell(p, family)[0]) is not None]
            for (a, sa), (b, sb) in zip(known, known[1:]):
                i, j = line.index(a), line.index(b)
                if j - i > 1 and not grid.same(sa, sb):
                    between = [q for q in line[i + 1:j] if not grid.store.unmeasurable(q)]
                    preferred = [q for q in between if _coord(q, along) in priority] or between
                    if preferred:
                        yield _middle_out(preferred)[0], [family]


def next_step(grid: Grid, only: list[str] | None = None,
              locked: frozenset[str] = frozenset()) -> tuple[Point, list[str] | None] | None:
    """The plan's first point not locked by another runner, with every family the plan wants there."""
    steps = [(p, fs) for p, fs in plan(grid, only) if p.name not in locked]
    if not steps:
        return None
    point, families = steps[0]
    if families is None or families == only:
        return point, families
    return point, sorted({f for p, fs in steps if p == point and fs for f in fs})


def _middle_out(points: list[Point]) -> list[Point]:
    mid = len(points) // 2
    return sorted(points, key=lambda p: abs(points.index(p) - mid))


def run(store: Store, axes: Axes, budget_s: float, log: Callable[[str], None] = print,
        only: list[str] | None = None) -> None:
    """Measure what the plan wants until the budget is spent. Several runners (and `vlcheck bisect`)
    may share the data folder: a point being measured is locked, and the others plan around it."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        store = Store(store.root, store.log)  # other runners may have added points
        locked = _locked(store.root)
        step = next_step(Grid(store, axes), only, locked)
        if step is None:
            log("matrix: nothing left to measure" + (" (other runners hold the rest)" if locked else ""))
            return
        point, families = step
        try:
            store.measure(point, families)
        except Unmeasurable as err:
            log(f"matrix: {point} cannot be measured: {str(err).splitlines()[0][:200]}")
    log(f"matrix: time budget of {budget_s:.0f} s spent")


def _locked(root: Path) -> frozenset[str]:
    return frozenset(p.name[:-len(".lock")] for p in (root / "points").glob("*.lock"))


EXIT_CODES = {
    "run": [(0, "ok", "measured until the budget was spent or nothing was left, then reported as `matrix report`"),
            (3, "stopped", "an environment could not be made for a reason not the versions' (uv missing, no "
                           "network, a full disk): nothing recorded about that point")],
    "add": [(0, "ok", "every report is a measured point")],
    "report": [(0, "ok", "the pin advice printed, the pages written")],
    "declarations": [(0, "ok", "the declarations to widen listed (rewritten with --write)")],
    "redigest": [(0, "ok", "every point digested again (reports missing from runs/ are named; their cells kept)")],
}
"""Per subcommand, its own exit codes (2 bad input or usage and 1 a crash are every command's: `vlcheck.cli.main`)."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class NoMatrix(ValueError):
    """--matrix-data names a folder without a matrix: bad input (exit 2)."""


def _grid(root: Path, store: Store) -> Grid:
    if not (root / AXES_FILE).exists():
        raise NoMatrix(f"{root}: no matrix here ({AXES_FILE} missing): `vlcheck matrix run --matrix-data {root}` measures one")
    return Grid(store, Axes.load(root))


def cmd_run(args: argparse.Namespace) -> int:
    root = Path(args.data)
    store = Store(root, _log)
    axes = _axes(args, root)
    _saved_axes(root, axes).save(root)
    started = time.monotonic()
    run(store, axes, args.budget, _log, args.family or None)
    _log(f"matrix run: {time.monotonic() - started:.0f} s")
    return _report(args, Grid(store, Axes.load(root)))


def cmd_report(args: argparse.Namespace) -> int:
    root = Path(args.data)
    return _report(args, _grid(root, Store(root, _log)))


def _report(args: argparse.Namespace, grid: Grid) -> int:
    from vlcheck.versions import compat_report

    if args.html:
        Path(args.html).write_text(compat_report.to_html(grid))
    if args.readme:
        compat_report.write_readme(grid, Path(args.readme), Path(args.data))
    print(compat_report.pin_advice_text(grid, args.family or None))
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Reports measured elsewhere (CI's reference and candidate) become points."""
    from vlcheck.versions.bisect import load_report

    store = Store(Path(args.data), _log)
    reports = {path: load_report(path) for path in args.reports}  # every one read before any is added
    for path, report in reports.items():
        env = report["environment"]
        store.add_report(Point(env["vllm"], env["transformers"]), report,
                         {"whole": set(report["families"]) >= set(all_families())}, source=Path(path).name)
    return 0


def cmd_redigest(args: argparse.Namespace) -> int:
    store = Store(Path(args.data), _log)
    missing = store.redigest()
    _log(f"{len(store.points)} points digested again" + (f"; reports missing: {', '.join(missing)}" if missing else ""))
    return 0


def cmd_declarations(args: argparse.Namespace) -> int:
    from vlcheck.versions import declarations

    root = Path(args.data)
    changes = declarations.widen(_grid(root, Store(root, _log)), write=args.write)
    print(declarations.to_text(changes))
    return 0


COMMANDS = {"run": cmd_run, "add": cmd_add, "report": cmd_report, "declarations": cmd_declarations,
            "redigest": cmd_redigest}


def cmd_matrix(args: argparse.Namespace) -> int:
    """`vlcheck matrix ACTION`, by its subcommand's name (`args.action`)."""
    return COMMANDS[args.action](args)


def _saved_axes(root: Path, axes: Axes) -> Axes:
    """What axes.json keeps: the union of every run's axes and priorities (runners may split the lines)."""
    if not (root / AXES_FILE).exists():
        return axes
    old = Axes.load(root)
    union = lambda a, b: sorted(set(a) | set(b), key=version_key)  # noqa: E731
    return Axes(union(old.vllm, axes.vllm), union(old.transformers, axes.transformers),
                union(old.priority_vllm, axes.priority_vllm), union(old.priority_transformers, axes.priority_transformers))


def _axes(args: argparse.Namespace, root: Path) -> Axes:
    old = Axes.load(root) if (root / AXES_FILE).exists() else None
    split = lambda s: [x for x in s.split(",") if x] if s else None  # noqa: E731
    vllm = split(args.vllm_releases) or (old.vllm if old else None)
    tf = split(args.transformers_releases) or (old.transformers if old else None)
    if vllm is None or tf is None:
        from vlcheck.versions.bisect import final_releases

        vllm = vllm or final_releases("vllm", *args.vllm_range.split(","))
        tf = tf or final_releases("transformers", *args.transformers_range.split(","))
    pv = split(args.priority_vllm) or [vllm[0], vllm[-1]]
    pt = split(args.priority_transformers) or [tf[0], tf[-1]]
    return Axes(sorted(vllm, key=version_key), sorted(tf, key=version_key),
                sorted(pv, key=version_key), sorted(pt, key=version_key))


def _low_high(text: str) -> str:
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: two releases, LOW,HIGH (e.g. 0.24.0,0.32.0)")
    return text


SUBCOMMANDS = {
    "run": "measure the matrix by bisection within --budget, then report as `matrix report` does",
    "add": "take `vlcheck check --json` reports (CI's baseline and candidate) as measured points",
    "report": "the tables: the transformers pin per vLLM release (printed), the Markdown page, the HTML page",
    "declarations": "widen the specs' declarations to the versions measured unchanged (--write); list those that changed",
    "redigest": "digest every point again from its full report in runs/ (after the comparison rules changed)",
}


def register(sub) -> None:
    p = sub.add_parser("matrix", help="measure (by bisection) and report the vLLM x transformers compatibility "
                                      "matrix per family: `vlcheck matrix SUBCOMMAND --help`", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    data_help = "the matrix's data folder (default: compat)"
    p.add_argument("--matrix-data", dest="data", default="compat", metavar="DIR", help=data_help + "; also after the subcommand")
    p.add_argument("--data", dest="data", default="compat", help=argparse.SUPPRESS)  # the former name
    actions = p.add_subparsers(dest="action", required=True, metavar="SUBCOMMAND", title="subcommands",
                               help="each with its own options (`vlcheck matrix SUBCOMMAND --help`)")

    def subcommand(name: str) -> argparse.ArgumentParser:
        q = actions.add_parser(name, help=SUBCOMMANDS[name], description=SUBCOMMANDS[name][0].upper() + SUBCOMMANDS[name][1:] + ".",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        # not given here: the value before the subcommand stands (`vlcheck matrix --matrix-data DIR report`)
        q.add_argument("--matrix-data", dest="data", default=argparse.SUPPRESS, metavar="DIR", help=data_help)
        q.add_argument("--data", dest="data", default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # the former name
        q.set_defaults(func=COMMANDS[name])
        return q

    def report_outputs(q: argparse.ArgumentParser, after: str = "") -> None:
        q.add_argument("--html", metavar="FILE", help=f"{after}write the matrix as a self-contained HTML page")
        q.add_argument("--markdown", "--readme", dest="readme", metavar="FILE",
                       help=f"{after}write the tables into this Markdown file: its generated section rewritten, the "
                            "rest kept (made when absent; --readme: the former name)")

    q = subcommand("run")
    q.add_argument("--budget", type=float, default=3600, metavar="SECONDS",
                   help="stop measuring after this long (default: %(default).0f)")
    q.add_argument("--vllm-releases", metavar="A,B,...",
                   help="the vLLM axis (default: the saved axis, else the index's releases in --vllm-range)")
    q.add_argument("--transformers-releases", metavar="A,B,...",
                   help="the transformers axis (default: the saved axis, else the index's in --transformers-range)")
    q.add_argument("--vllm-range", default="0.24.0,0.32.0", metavar="LOW,HIGH", type=_low_high,
                   help="without --vllm-releases, every final vLLM release between these (default: %(default)s)")
    q.add_argument("--transformers-range", default="5.16.1,5.23.0", metavar="LOW,HIGH", type=_low_high,
                   help="without --transformers-releases, every final transformers release between these "
                        "(default: %(default)s)")
    q.add_argument("--priority-vllm", metavar="A,B,...", help="vLLM releases measured whole first (default: the ends)")
    q.add_argument("--priority-transformers", metavar="A,B,...",
                   help="transformers releases measured whole first (default: the ends)")
    q.add_argument("--family", action="append", metavar="NAME",
                   help="measure only these families (repeatable); the pin advice for them only")
    report_outputs(q, "after measuring: ")

    q = subcommand("add")
    q.add_argument("reports", nargs="+", metavar="REPORT", help="`vlcheck check --json` reports, each a point")

    q = subcommand("report")
    q.add_argument("--family", action="append", metavar="NAME", help="the pin advice for these families only (repeatable)")
    report_outputs(q)

    q = subcommand("declarations")
    q.add_argument("--write", action="store_true", help="rewrite the spec files (default: list the changes only)")

    subcommand("redigest")
