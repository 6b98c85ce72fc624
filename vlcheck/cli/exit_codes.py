"""Exit codes: every command's, in one table (help epilogs, docs/cli.md): 0 fine, 2 bad input or usage,
3 could not run, 4-7 findings, and 1 only for a crash of vlcheck itself."""

from __future__ import annotations

import argparse

CHECK_EXIT = {"ok": 0, "error": 3, "fail": 4}
"""`vlcheck check`: 0 every check passed or deviated as declared, 4 some check failed (a finding),
3 vlcheck could not run some check (error); 2 bad input or usage; 1 only when vlcheck itself crashed."""


CRASH = 1
"""vlcheck itself crashed: Python's code for an uncaught exception, never an outcome about the versions."""


USAGE = 2
"""Bad input or usage (argparse's own code for a bad flag): the message names the file and the problem."""


RUN_FAIL = CHECK_EXIT["fail"]
"""`vlcheck run`: the engine failed to start, or the cache was NOT VERIFIED: a finding, as `check`'s 4."""


COMMON_EXITS = [
    (CRASH, "crash", "vlcheck itself crashed (an uncaught exception, its traceback printed): a bug in vlcheck, "
                     "nothing said about the versions"),
    (USAGE, "bad input", "a bad flag or argument, a file that cannot be read, a spec that does not load (the "
                         "message names it)"),
]
"""Every command's: 1 only for a crash, 2 for bad input or usage."""


def own_exit_codes() -> dict[str, tuple[list[tuple[int, str, str]], str]]:
    """Per command (a matrix subcommand as `matrix run`): its own exit codes as (code, label, meaning),
    and a note; 1 and 2 (`COMMON_EXITS`) are added to each by `exit_codes`. A command's own 2 replaces
    the common one."""
    from vlcheck.cli import plant_command, pr_command, seeds_command, speed_command, store_command, tier_command
    from vlcheck.gate import diff
    from vlcheck.versions import bisect, envs, matrix, same_source

    verdicts = [(code, verdict, diff.VERDICT_TEXT[verdict].split(": ", 1)[1]) for verdict, code in diff.EXIT_CODES.items()]
    own = {
        "check": ([(CHECK_EXIT["ok"], "ok", "every check passed, or deviated as declared (skips included)"),
                   (CHECK_EXIT["error"], "error", "vlcheck could not run some check (an error, not a finding): no "
                                                  "verdict on it"),
                   (CHECK_EXIT["fail"], "fail", "some check failed: a finding")], ""),
        "same-source": ([(0, "same", "every version's CPU build has the CUDA wheel's Python sources"),
                         (same_source.NOT_DOWNLOADED, "not downloaded",
                          "a wheel could not be downloaded (no such release, or no network)"),
                         (same_source.DIFFERS, "differs", "some version's CPU build differs from its CUDA wheel "
                                                          "(the files listed): the answer, not a failure")], ""),
        "diff": (verdicts, "with --fail-on VERDICTS: a verdict not named exits 0, and says so"),
        "merge": ([(0, "ok", "the shards merged, the report written")], ""),
        "init": ([(0, "ok", "the starter spec written (an existing file without --force: 2)")], ""),
        "list": ([(0, "ok", "the families listed (a spec that does not load: 2, after the list)")], ""),
        "show": ([(0, "ok", "the spec printed")], ""),
        "render": ([(0, "ok", "the prompts printed")], ""),
        "run": ([(0, "ok", "the example ran (with --verify-mm-cache-hit-with-uuids: VERIFIED)"),
                 (USAGE, "bad input", "a bad flag or argument, or this machine cannot run the family (no GPU, too "
                                      "few GPUs, its weights or a package missing: the message says which)"),
                 (RUN_FAIL, "fail", "a finding, as `check`'s 4: the engine failed to start, or the cache was NOT "
                                    "VERIFIED")], ""),
        "env": (envs.EXIT_CODES, envs.EXIT_NOTE),
        "bisect": (bisect.EXIT_CODES, ""),
    }
    own.update({f"matrix {name}": (codes, "") for name, codes in matrix.EXIT_CODES.items()})
    own.update({f"store {name}": (codes, "") for name, codes in store_command.EXIT_CODES.items()})
    own.update({f"pr {name}": (codes, "") for name, codes in pr_command.EXIT_CODES.items()})
    own.update({f"tier {name}": (codes, "") for name, codes in tier_command.EXIT_CODES.items()})
    own.update({name: (codes, "") for name, codes in plant_command.EXIT_CODES.items()})
    own.update({f"seeds {name}": (codes, "") for name, codes in seeds_command.EXIT_CODES.items()})
    own.update({f"speed {name}": (codes, "") for name, codes in speed_command.EXIT_CODES.items()})
    return own


def exit_codes() -> dict[str, tuple[list[tuple[int, str, str]], str]]:
    """Per command: every exit code it returns, ascending, and a note (help epilogs, docs/cli.md)."""
    out = {}
    for command, (own, note) in own_exit_codes().items():
        codes = {code: (code, label, meaning) for code, label, meaning in COMMON_EXITS}
        codes.update({code: (code, label, meaning) for code, label, meaning in own})
        out[command] = (sorted(codes.values()), note)
    return out


def exit_epilog(codes: list[tuple[int, str, str]], note: str = "") -> str:
    import textwrap

    lines = ["exit codes:"]
    for code, label, meaning in codes:
        lines += textwrap.wrap(f"{code:>3}  {label}: {meaning}", 100, subsequent_indent=" " * 5)
    if note:
        lines += textwrap.wrap(note, 100, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser, str]]:
    """Every command that runs (`matrix run`, not `matrix`) as (name, its parser, its one-line help), in
    the order `vlcheck --help` lists them."""
    out = []
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in action._choices_actions}
    for name, child in action.choices.items():
        if any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
            out += commands(child, f"{prefix}{name} ")
        else:
            out.append((prefix + name, child, helps.get(name, "")))
    return out


def group_epilog(codes: dict[str, list[tuple[int, str, str]]]) -> str:
    """A command with subcommands: the codes every one returns, then the others, naming who returns them."""
    every = set.intersection(*({c[:2] for c in cs} for cs in codes.values()))
    lines = ["exit codes (each subcommand's --help says more):"]
    lines += [f"{code:>3}  {label}" for code, label in sorted(every)]
    for name, cs in codes.items():
        lines += [f"{code:>3}  {label} ({name})" for code, label, _ in cs if (code, label) not in every]
    return "\n".join(lines)
