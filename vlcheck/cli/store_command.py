"""`vlcheck store verify`: is what the result store serves what would be measured now?"""

from __future__ import annotations

import random
import sys

SAME, NOTHING, DIFFERS = 0, 3, 4
EXIT_CODES = {
    "verify": [(SAME, "same", "every verified cell measured what the store holds"),
               (NOTHING, "nothing verified", "the store holds no cell for this environment's code and specs (run "
                                             "`vlcheck check` first)"),
               (DIFFERS, "differs", "a stored cell differs from what is measured now: it is taken out of the store "
                                    "and named (a vlcheck bug: report it)")],
}


def cmd_verify(args) -> int:
    from vlcheck.gate.checks import cpu_checks
    from vlcheck.gate.store import configured
    from vlcheck.gate.store_verify import verify
    from vlcheck.spec.registry import default_selection, get_family

    store = configured(args.store)
    if store is None:
        print("vlcheck store verify: --store none: there is no store to verify", file=sys.stderr)
        return 2
    families = [get_family(n) for n in (args.family or default_selection())]
    checks = cpu_checks(args.check)

    def progress(i: int, n: int, family: str, check: str) -> None:
        print(f"[{i}/{n}] measuring {family} {check} again", file=sys.stderr, flush=True)

    seed = args.seed if args.seed is not None else random.randrange(10_000)
    if not args.all:
        print(f"sample of {args.sample} (--seed {seed} draws it again)", file=sys.stderr)
    verified, stored = verify(store, families, checks, None if args.all else args.sample, seed, progress)
    if not verified:
        print(f"nothing verified: {store.path} holds no cell for this environment's code and these "
              f"{len(families)} families x {len(checks)} checks (run `vlcheck check` first)")
        return NOTHING
    for v in verified:
        print(f"{'same   ' if v.same else 'DIFFERS'} {v.family} {v.check}"
              + "".join(f"\n    {line}" for line in v.differences))
    bad = [v for v in verified if not v.same]
    print(f"{len(verified)} of the {stored} cells stored for this environment measured again: "
          f"{len(verified) - len(bad)} the same, {len(bad)} differ"
          + (" (taken out of the store)" if bad else ""))
    return DIFFERS if bad else SAME


def register(sub) -> None:
    from vlcheck.cli.command_group import add_group
    from vlcheck.gate.checks import CATALOGUE

    actions = add_group(sub, "store", "the result store `vlcheck check` and the pytest tier share",
                        "The result store keeps each measured cell under the hash of everything it depends on, the "
                        "installed packages' code by content included, so that a cell is never measured twice for "
                        "the same code, and never served for other code.")
    q = actions.add_parser("verify", help="measure a sample of the stored cells again and compare: exit 4 when one "
                                          "differs (it is taken out of the store)")
    q.add_argument("--store", metavar="DIR", default=None,
                   help="the result store (default: $VLCHECK_STORE or ~/.cache/vlcheck/results)")
    q.add_argument("--family", action="append", metavar="NAME", help="only these families (repeatable)")
    q.add_argument("--check", action="append", metavar="NAME", choices=list(CATALOGUE),
                   help="only these CPU checks (repeatable); engine cells are not verified here")
    q.add_argument("--sample", type=int, default=5, metavar="N",
                   help="how many stored cells to measure again, chosen at random (default: %(default)s)")
    q.add_argument("--all", action="store_true", help="every stored cell of this environment")
    q.add_argument("--seed", type=int, default=None, help="which sample (default: a new one each run, printed)")
    q.set_defaults(func=cmd_verify)
