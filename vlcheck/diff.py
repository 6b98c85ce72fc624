"""`vlcheck diff OLD.json NEW.json`: what changed between two environments' reports.

A regression is a check that was fine (pass, or a declared deviation) and now fails, or that
passed and now only passes by a declared deviation. Newly skipped checks are listed as lost
coverage. Facts that moved (prompts, template hashes, token counts, goldens) are listed too.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

OK = ("pass", "declared deviation")


@dataclass
class Diff:
    old_env: dict
    new_env: dict
    regressions: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    lost_coverage: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def compare(old: dict, new: dict) -> Diff:
    d = Diff(old["environment"], new["environment"])
    for family in sorted(set(old["families"]) | set(new["families"])):
        o_row = old["families"].get(family)
        n_row = new["families"].get(family)
        if n_row is None:
            d.lost_coverage.append(f"{family}: no longer in the report")
            continue
        if o_row is None:
            d.moved.append(f"{family}: new family")
            continue
        for check in sorted(set(o_row["checks"]) | set(n_row["checks"])):
            o, n = o_row["checks"].get(check), n_row["checks"].get(check)
            if o is None or n is None:
                continue
            was, now = o["status"], n["status"]
            where = f"{family} {check}"
            if was in OK and now == "fail":
                d.regressions.append(f"{where}: {was} -> fail: {n['reason']}")
            elif was == "pass" and now == "declared deviation":
                d.regressions.append(f"{where}: pass -> declared deviation: {n['reason']}")
            elif was == "fail" and now in OK:
                d.fixed.append(f"{where}: fail -> {now}")
            elif was != "skip" and now == "skip":
                d.lost_coverage.append(f"{where}: {was} -> skip: {n['reason']}")
            d.moved += _moved_facts(where, o.get("data", {}), n.get("data", {}))
    return d


def _moved_facts(where: str, old: dict, new: dict) -> list[str]:
    out = []
    for key in sorted(set(old) & set(new)):
        if old[key] == new[key]:
            continue
        if isinstance(old[key], list) and all(isinstance(x, str) for x in old[key] + new[key]):
            lines = list(difflib.unified_diff(old[key], new[key], "old", "new", lineterm="", n=0))[2:]
            out.append(f"{where}: {key} changed:\n" + "\n".join("    " + line for line in lines[:20]))
        else:
            out.append(f"{where}: {key}: {json.dumps(old[key])[:200]} -> {json.dumps(new[key])[:200]}")
    return out


def to_text(d: Diff) -> str:
    env = " ".join(f"{k} {d.old_env.get(k)} -> {d.new_env.get(k)}" for k in ("vllm", "transformers", "torch")
                   if d.old_env.get(k) != d.new_env.get(k)) or "same vllm/transformers/torch"
    parts = [f"environment: {env}"]
    for title, items in (("REGRESSIONS", d.regressions), ("fixed", d.fixed), ("lost coverage", d.lost_coverage),
                         ("moved", d.moved)):
        parts.append(f"{title} ({len(items)}):" + "".join(f"\n  {i}" for i in items))
    parts.append("verdict: " + ("REGRESSED: do not upgrade" if d.regressed else "no regression"))
    return "\n".join(parts) + "\n"


def to_markdown(d: Diff) -> str:
    env = ", ".join(f"{k} `{d.old_env.get(k)}` → `{d.new_env.get(k)}`" for k in ("vllm", "transformers", "torch")
                    if d.old_env.get(k) != d.new_env.get(k)) or "same vllm/transformers/torch"
    lines = [f"## vlcheck diff: {'❌ regressions' if d.regressed else '✅ no regression'}", "", env, ""]
    for title, items in (("Regressions", d.regressions), ("Fixed", d.fixed), ("Lost coverage", d.lost_coverage),
                         ("Moved", d.moved)):
        if items:
            lines += [f"### {title} ({len(items)})", ""]
            lines += [f"- {i.splitlines()[0]}" + ("\n  ```\n" + "\n".join(i.splitlines()[1:]) + "\n  ```"
                                                   if len(i.splitlines()) > 1 else "") for i in items]
            lines.append("")
    return "\n".join(lines)
