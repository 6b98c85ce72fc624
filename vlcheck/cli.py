"""The `vlcheck` command: list, show and render family specs; check them against assets."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, Sequence

from vlcheck.registry import SpecError, UnknownFamily, all_families, get_family
from vlcheck.render import NeedsChatTemplate, pick_variant, render_prompts
from vlcheck.spec import FamilySpec


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
    }


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def cmd_list(args) -> int:
    summaries = [family_summary(s) for s in all_families().values()]
    if args.json:
        print(json.dumps(summaries, indent=2))
        return 0
    rows = [[s["name"], s["model"], ",".join(s["modalities"]) or "-",
             f"1..{s['max_images']}" if s["multi_image"] else "-", s["gpus"], s["prompt_source"]]
            for s in summaries]
    print(table(rows, ["family", "model", "modalities", "multi-image", "GPUs", "prompt"]))
    single = sum(s["single_input"] for s in summaries)
    multi = sum(s["multi_image"] for s in summaries)
    print(f"\n{len(summaries)} families: {single} single-input, {multi} multi-image")
    return 0


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def cmd_show(args) -> int:
    spec = get_family(args.family)
    data = _jsonable(spec)
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
        from vlcheck.templates import chat_renderer_or_none  # imports transformers: only when needed

        renderer = chat_renderer_or_none(variant)
    prompts = render_prompts(spec, args.modality, args.question, args.images, renderer)
    if args.json:
        print(json.dumps({"prompts": prompts}, ensure_ascii=False, indent=2))
    else:
        for i, prompt in enumerate(prompts, 1):
            print(f"--- prompt {i} ---")
            print(prompt)
    return 0


def cmd_check(args) -> int:
    from vlcheck.checks import CPU_CHECKS, run_checks
    from vlcheck.results import Status

    families = [get_family(n) for n in args.family] if args.family else list(all_families().values())
    checks = CPU_CHECKS
    total = len(families) * len(checks)
    done = 0

    def progress(family: str, check: str) -> None:
        nonlocal done
        done += 1
        if sys.stderr.isatty():
            print(f"\r[{done}/{total}] {family}: {check}".ljust(60), end="", file=sys.stderr, flush=True)

    results = run_checks(families, checks, progress)
    if sys.stderr.isatty():
        print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
    by_family: dict[str, dict[str, Any]] = {}
    for r in results:
        by_family.setdefault(r.family, {})[r.check] = r
    if args.json:
        data = [{"family": r.family, "check": r.check, "status": r.status.value, "reason": r.reason,
                 "details": r.details, "data": {k: v for k, v in r.data.items() if not k.endswith(".rendered")}}
                for r in results]
        text = json.dumps({"results": data}, indent=2, ensure_ascii=False)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if args.json != "-":
        rows = []
        for family, cells in by_family.items():
            template = cells["template"]
            source = sorted({v for k, v in template.data.items() if k.endswith(".template_source")})
            why = [f"{c.check}: {c.reason}" for c in cells.values() if c.status in (Status.SKIP, Status.FAIL)]
            rows.append([family, ",".join(source) or "-", *(cells[c].status.value for c in checks),
                         (why[0][:90] if why else "")])
        print(table(rows, ["family", "template source", *checks, "why (first skip/fail)"]))
        counts = {s.value: sum(r.status is s for r in results) for s in Status}
        print("\n" + ", ".join(f"{n} {s}" for s, n in counts.items()))
        deviations = [r for r in results if r.status is Status.DEVIATION]
        if deviations:
            print("\ndeclared deviations:")
            for r in deviations:
                print(f"  {r.family} {r.check}: {r.reason}")
    return 1 if any(r.status is Status.FAIL for r in results) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vlcheck", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="the families and what they need")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="one family's resolved spec, as JSON")
    p.add_argument("family")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("render", help="the exact prompt strings of a family's example")
    p.add_argument("family")
    p.add_argument("--modality", choices=["image", "video"], default="image")
    p.add_argument("--images", type=int, metavar="N",
                   help="render the multi-image example with N images (default: the single-input example)")
    p.add_argument("--question", action="append", metavar="TEXT",
                   help="a question (repeatable); default: the example's questions")
    p.add_argument("--json", action="store_true", help='print {"prompts": [...]}')
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("check", help="run the conformance checks; exit 1 on any failure")
    p.add_argument("--family", action="append", metavar="NAME", help="only these families (repeatable)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON to FILE ('-': stdout only)")
    p.set_defaults(func=cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UnknownFamily as e:
        print(f"vlcheck: {e}", file=sys.stderr)
        return 2
    except (SpecError, NeedsChatTemplate, ValueError) as e:
        print(f"vlcheck: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
