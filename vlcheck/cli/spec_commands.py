"""`vlcheck list`, `show`, `render` and `init`: the families' specs, their prompts, and a starter spec
for your own model."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from vlcheck.cli.exit_codes import USAGE
from vlcheck.prompt.render import pick_variant, render_prompts
from vlcheck.spec.registry import (
    all_families,
    default_selection,
    get_family,
    spec_errors,
)
from vlcheck.spec.schema import FamilySpec


def family_summary(spec: FamilySpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "title": spec.title,
        "model": spec.model,
        "modalities": list(spec.modalities),
        "single_input": spec.single is not None,
        "multi_image": spec.multi_image is not None,
        "max_images": spec.multi_image.max_images if spec.multi_image else None,
        "audio": spec.audio is not None,
        "max_audios": spec.audio.max_audios if spec.audio else None,
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
             f"1..{s['max_images']}" if s["multi_image"] else "-", f"1..{s['max_audios']}" if s["audio"] else "-",
             s["gpus"], s["prompt_source"]]
            for s in summaries]
    print(table(rows, ["family", "model", "modalities", "multi-image", "audio", "GPUs", "prompt"]))
    single = sum(s["single_input"] for s in summaries)
    multi = sum(s["multi_image"] for s in summaries)
    audio = sum(s["audio"] for s in summaries)
    print(f"\n{len(summaries)} families: {single} single-input, {multi} multi-image, {audio} audio")
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
            m: variant.engine_args_for(m, variant.most_items) for m in variant.modalities}
    print(json.dumps(data, indent=2, ensure_ascii=False))
    return 0


def cmd_render(args) -> int:
    spec = get_family(args.family)
    renderer = None
    variant = pick_variant(spec, args.modality, args.images)
    if variant.prompt.chat_template is not None:
        from vlcheck.prompt.templates import (
            chat_renderer_or_none,  # imports transformers: only when needed
        )

        renderer = chat_renderer_or_none(variant)
    prompts = render_prompts(spec, args.modality, args.question, args.images, renderer)
    if args.json:
        emit_json({"prompts": prompts}, args.json)
    else:
        for i, prompt in enumerate(prompts, 1):
            print(f"--- prompt {i} ---")
            print(prompt)
    return 0


def cmd_init(args) -> int:
    from vlcheck.cli.starter import write_starter

    path, verdict = write_starter(args.model, args.output, args.name, args.force)
    print(f"wrote {path}: {verdict}")
    print(f"review it, then: vlcheck check --specs {path.parent}")
    return 0


def register(sub, common) -> None:
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
