"""`vlcheck speed`: is the candidate slower? Two environments timed on this machine, interleaved."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SAME, SLOWER = 0, 4
EXIT_CODES = {
    "ab": [(SAME, "not slower", "no family-config is slower beyond its measured noise (faster ones are listed)"),
           (3, "could not run", "an environment's worker did not start or answer (the message names it)"),
           (SLOWER, "slower", "some family-config's preprocessing is slower in the candidate beyond FACTOR x the "
                              "two environments' combined noise: a finding, named with its metric and ratio")],
    "worker": [(0, "ok", "answered every request on stdin until it closed")],
}


def at_least_one(text: str) -> int:
    import argparse

    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def family_configs(names: list[str] | None) -> list[tuple[str, str]]:
    """The named families' family-configs (an unknown name: UnknownFamily, exit 2), else every family's
    whose spec loads."""
    from vlcheck.spec.registry import default_selection, get_family, spec_errors

    broken = {} if names else spec_errors()
    return [(n, v.kind) for n in names or default_selection() if n not in broken for v in get_family(n).variants]


def cmd_ab(args) -> int:
    from vlcheck.speed import ab, page

    configs = family_configs(args.family)
    print(f"{len(configs)} family-configs x {args.sessions} sessions x {args.rounds} rounds (ABBA) x {args.repeats} calls, baseline "
          f"{args.baseline}, candidate {args.candidate}", file=sys.stderr)
    try:
        report = ab.run(Path(args.baseline), Path(args.candidate), configs, args.sessions, args.rounds, args.repeats,
                        served=args.served)
    except ab.WorkerFailed as err:
        print(f"vlcheck speed ab: {err}", file=sys.stderr)
        return 3
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.html:
        Path(args.html).write_text(page.render(report))
    if not report["same_machine"]:
        print("the two environments answered from different machines: reported, not decided")
        return SAME
    slower = ab.slower(report)
    print("\n".join(["SLOWER:"] + slower) if slower else "no family-config slower beyond its noise")
    return SLOWER if slower else SAME


def table(report: dict) -> str:
    env = report["environments"]
    lines = [f"baseline vllm {env['baseline']['versions'].get('vllm')} transformers "
             f"{env['baseline']['versions'].get('transformers')}; candidate vllm {env['candidate']['versions'].get('vllm')} "
             f"transformers {env['candidate']['versions'].get('transformers')}; {report['seconds']} s",
             f"{'family-config':34} {'metric':17} {'baseline ms':>11} {'candidate ms':>12} {'ratio':>7} "
             f"{'band':>7}  verdict"]
    for r in report["family_configs"]:
        name = f"{r['family']}-{r['variant']}"
        if not r["comparisons"]:
            lines.append(f"{name:34} skip: {'; '.join(f'{s}: {why}' for s, why in r['skip'].items())[:200]}")
        elif r["skip"]:
            lines.append(f"{name:34} not timed: {'; '.join(f'{s}: {why}' for s, why in r['skip'].items())[:200]}")
        for c in r["comparisons"]:
            lines.append(f"{name:34} {c['metric']:17} {1000 * c['baseline_s']:11.2f} {1000 * c['candidate_s']:12.2f} "
                         f"{c['ratio']:7.3f} {c['threshold']:7.3f}  {c['verdict']}")
    return "\n".join(lines)


def cmd_worker(args) -> int:
    from vlcheck.speed.worker import serve

    return serve(served=args.served)


def register(sub) -> None:
    from vlcheck.cli.command_group import add_group
    from vlcheck.speed.rule import FACTOR

    actions = add_group(sub, "speed", "is the candidate slower? vLLM's preprocessing per family-config, A/B on this machine",
                        "A slower vLLM is a finding. The preprocessing a request costs before the model (vLLM's "
                        "multimodal processor with its cache off and on, its video decoding) does not depend on the "
                        "weights, so it is timed truly on the synthetic checkpoints, on any machine. Times from two "
                        "machines are not comparable: `speed ab` runs both environments on this one, interleaved.")
    q = actions.add_parser("ab", help="time two environments interleaved (ABBA rounds) and name what got slower",
                           description="Starts one worker in each environment (its own vlcheck, its vLLM) and asks "
                                       "both for the same family-config in turn, ABBA over the rounds, in sessions of "
                                       "fresh workers (a process's speed is its own). Each session keeps the median "
                                       "per call; an environment's noise is the spread of its session medians over "
                                       f"the square root of their number; a family-config is SLOWER when candidate/baseline exceeds "
                                       f"exp({FACTOR:g} x the two noises combined) (vlcheck/speed/rule.py, docs/speed.md).")
    q.add_argument("baseline", metavar="BASELINE_ENV", help="a virtual environment with vlcheck installed (the version "
                                                            "you run now; `vlcheck env` makes one per version pair)")
    q.add_argument("candidate", metavar="CANDIDATE_ENV", help="the environment of the upgrade")
    q.add_argument("--family", action="append", metavar="NAME", help="only these families (repeatable; default: all)")
    q.add_argument("--sessions", type=at_least_one, default=4, metavar="S",
                   help="sessions of fresh workers, the unit the noise is measured over (default: %(default)s; fewer "
                        "than 3 are reported, never decided)")
    q.add_argument("--rounds", type=at_least_one, default=5, metavar="N", help="rounds per session, ABBA (default: %(default)s)")
    q.add_argument("--repeats", type=at_least_one, default=10, metavar="K", help="calls per round, their median kept "
                                                                       "(default: %(default)s)")
    q.add_argument("--served", action="store_true",
                   help="also time each family-config's render server answering the example's chat request over "
                        "HTTP (`render`: what a client waits for; a server start per family-config and worker, a few "
                        "seconds each; `chat_render` times the renderer itself either way)")
    q.add_argument("--json", metavar="FILE", help="write the per-round medians and comparisons as JSON")
    q.add_argument("--html", metavar="FILE", help="write the ratios with their noise bands as a page")
    q.set_defaults(func=cmd_ab)
    w = actions.add_parser("worker", help="one environment's side of `speed ab` (JSON lines on stdin and stdout)",
                           description="Reads {\"family\", \"variant\", \"repeats\"} lines and answers each with the "
                                       "family-config's timings in this environment; its first line names the "
                                       "versions and the machine. `speed ab` starts it; run it by hand to see why a "
                                       "worker does not start.")
    w.add_argument("--served", action="store_true", help="also start each family-config's render server and time it (`render`)")
    w.set_defaults(func=cmd_worker)
