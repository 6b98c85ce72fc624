"""`vlcheck diff` (the verdict) and `vlcheck merge` (shard reports as one)."""

from __future__ import annotations

import argparse
import json

from vlcheck.cli.check_command import write_report


def cmd_merge(args) -> int:
    from vlcheck.gate.diff import load
    from vlcheck.runners.merge import merge

    reports = {path: load(path, known_statuses=False) for path in args.reports}
    merged = merge(reports)  # a MergeError names what disagrees: bad input, exit 2
    write_report(merged, args.output, args.html, args.markdown)
    print(f"{len(args.reports)} reports, {len(merged['families'])} families -> {args.output}: "
          + ", ".join(f"{n} {s}" for s, n in merged["summary"].items()))
    return 0


def cmd_diff(args) -> int:
    from vlcheck.gate import accepted, diff
    from vlcheck.versions.points import point_index

    old, new = diff.load(args.old), diff.load(args.new)
    accepted_changes = accepted.load(args.accepted) if args.accepted else []
    d = diff.compare(old, new)
    if args.speed:
        from vlcheck.gate import speed_diff

        speed_diff.add(d, speed_diff.load(args.speed), args.speed)
    if args.draft_accepted:
        with open(args.draft_accepted, "w", encoding="utf-8") as f:
            f.write(accepted.draft([*d.regressions, *d.lost_coverage, *d.moved]))
    d.apply(accepted_changes)
    d.group_causes(point_index(args.points if args.points is not None else _default_points(), d.old_env, d.new_env))
    print(diff.to_text(d), end="")
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(diff.to_markdown(d))
    if args.json or args.html:
        from vlcheck.gate import diff_pages

        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(diff_pages.to_json(d), f, indent=1, ensure_ascii=False)
        if args.html:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(diff_pages.to_html(d))
    if args.fail_on is not None and d.verdict not in args.fail_on:
        print(f"exit 0: the verdict {d.verdict} is not one of --fail-on {','.join(args.fail_on).lower()}")
        return 0
    return d.exit_code


def _default_points() -> str | None:
    """The matrix's measured points: ./compat, else the checkout's compat/ (none in a wheel)."""
    from pathlib import Path

    for folder in (Path("compat"), Path(__file__).resolve().parents[2] / "compat"):
        if (folder / "points").is_dir():
            return str(folder)
    return None


def _verdicts(text: str) -> list[str]:
    from vlcheck.gate.diff import EXIT_CODES

    names = [v.strip().upper() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in EXIT_CODES or v == "SAFE"]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: name verdicts among "
                                         f"{', '.join(v.lower() for v in EXIT_CODES if v != 'SAFE')}")
    return names


def register(sub, common) -> None:
    p = sub.add_parser("diff", parents=common,
                       help="the verdict: compare a baseline report with a candidate's: SAFE (exit 0), INCONCLUSIVE "
                            "(3: some checks could not run), REGRESSED (4), CHANGED (5: facts moved, review), "
                            "INCOMPLETE (6: coverage lost), FAILING (7: checks fail on the candidate that were not "
                            "fine on the baseline); 2: bad input. Causes first: the cells grouped by their evidence")
    p.add_argument("old", metavar="BASELINE", help="the baseline: `vlcheck check --json` on the versions you run today")
    p.add_argument("new", metavar="CANDIDATE", help="the candidate's report")
    p.add_argument("--markdown", metavar="FILE", help="also write the diff as Markdown (a pull-request comment)")
    p.add_argument("--json", metavar="FILE", help="also write the diff as JSON: verdict, exit, causes, every cell "
                                                  "(what a CI job or a bot reads)")
    p.add_argument("--html", metavar="FILE", help="also write one self-contained HTML page: the causes, then each "
                                                  "cell's old and new facts side by side, the first difference marked")
    p.add_argument("--fail-on", type=_verdicts, metavar="VERDICTS",
                   help="exit non-zero only for these verdicts (comma-separated: regressed, failing, inconclusive, "
                        "incomplete, changed); any other verdict exits 0 and says so. Default: every verdict but SAFE")
    p.add_argument("--matrix-data", dest="points", metavar="DIR",
                   help="the matrix's data folder (`vlcheck matrix --matrix-data`) whose measured points place each "
                        "cause's first bad release (default: ./compat, else the checkout's compat/)")
    p.add_argument("--points", dest="points", help=argparse.SUPPRESS)  # the former name
    p.add_argument("--speed", metavar="FILE", help="a `vlcheck speed ab --json` run of the same two versions: what it "
                                                "found SLOWER beyond its noise on one machine is a regression "
                                                "(docs/speed.md); other versions than the reports': exit 2")
    p.add_argument("--accepted", metavar="FILE", help="a TOML file of reviewed, accepted changes (family, check, "
                                                      "fact, from, to, reason): they no longer decide the verdict")
    p.add_argument("--draft-accepted", metavar="FILE", help="write every change of this diff as a draft of that file "
                                                            "(reasons empty: fill them in after review)")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("merge", parents=common,
                       help="combine the `check --shard I/N --json` reports of all shards into one report")
    p.add_argument("reports", nargs="+", metavar="REPORT", help="the `check --shard I/N --json` reports, one per shard")
    p.add_argument("--json", "-o", "--output", dest="output", metavar="FILE", required=True,
                   help="write the merged report as JSON (the input of `vlcheck diff`; -o and --output: the former names)")
    p.add_argument("--html", metavar="FILE", help="also write it as a self-contained HTML report")
    p.add_argument("--markdown", metavar="FILE", help="also write it as a Markdown report")
    p.set_defaults(func=cmd_merge)
