"""`vlcheck seeds diff SCRIPT...`: the catalogue against vLLM's newer example scripts."""

from __future__ import annotations

import json
import sys

IN_SYNC, LAGS = 0, 4
EXIT_CODES = {"diff": [(IN_SYNC, "in sync", "every family of the scripts has a spec, and no spec drifted or is gone"),
                       (LAGS, "lags", "families without a spec, specs gone from the scripts, or specs that drifted "
                                      "(listed): a finding about the catalogue, not a crash")]}


def cmd_diff(args) -> int:
    from pathlib import Path

    from vlcheck.examples.seeds_diff import diff
    from vlcheck.spec.registry import all_families

    families = all_families()
    results = []
    for script in args.scripts:
        path = Path(script)
        if not path.is_file():
            print(f"vlcheck seeds diff: {script}: no such file", file=sys.stderr)
            return 2
        print(f"reading {path.name} ...", file=sys.stderr, flush=True)
        results.append(diff(path, families, args.kind))
        print(results[-1].text(), end="\n\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([vars(r) for r in results], f, indent=1)
    return IN_SYNC if all(r.in_sync for r in results) else LAGS


def register(sub) -> None:
    from vlcheck.cli.command_group import add_group
    from vlcheck.examples.seeds_diff import KINDS

    actions = add_group(sub, "seeds", "the family specs against vLLM's example scripts",
                        "The specs were read from vLLM's example scripts; vLLM keeps changing them. `vlcheck seeds "
                        "diff` reads newer copies and says what the catalogue lacks or no longer matches.")
    q = actions.add_parser("diff", help="families an example script has and no spec has, specs gone from it, and "
                                        "specs whose model, prompt or engine args drifted from it")
    q.add_argument("scripts", nargs="+", metavar="SCRIPT",
                   help="vLLM example scripts (vision_language.py, vision_language_multi_image.py, audio_language.py)")
    q.add_argument("--kind", choices=KINDS, default=None,
                   help="which variant the scripts' examples are (default: from the file name)")
    q.add_argument("--json", metavar="FILE", help="also write the differences as JSON")
    q.set_defaults(func=cmd_diff)
