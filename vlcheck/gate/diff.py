"""`vlcheck diff OLD.json NEW.json`: what changed between two environments' reports, and a verdict.

- A regression is a check that was fine (pass, or a declared deviation) and now fails, or that
  passed and now only passes by a declared deviation.
- A check that vlcheck could not run (`error`) on either side is never a regression: it is listed
  as not run, and makes the verdict INCONCLUSIVE unless a real regression was found elsewhere.
- Newly skipped checks are lost coverage. Facts that moved (prompts, template hashes, token
  counts, goldens) are listed; a fact measured on one side only is "not measured" on the other.

Verdicts and `vlcheck diff` exit codes: SAFE 0, REGRESSED 1, INCONCLUSIVE 3.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

from vlcheck.core.results import NOT_APPLIED

OK = ("pass", "declared deviation")
ERROR = "error"
EXIT_CODES = {"SAFE": 0, "REGRESSED": 1, "INCONCLUSIVE": 3}
VERDICT_TEXT = {"SAFE": "SAFE: no regression in the checks that ran on both sides",
                "REGRESSED": "REGRESSED: do not upgrade (real behaviour changes: see the regressions)",
                "INCONCLUSIVE": "INCONCLUSIVE: no regression found, but some checks could not run (see 'could not run')"}


@dataclass
class Diff:
    old_env: dict
    new_env: dict
    regressions: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    """Checks vlcheck itself could not run (status `error`) on either side."""
    lost_coverage: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    not_measured: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def verdict(self) -> str:
        if self.regressions:
            return "REGRESSED"
        return "INCONCLUSIVE" if self.not_run else "SAFE"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


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
            _compare_cell(d, f"{family} {check}", o, n)
    return d


def _compare_cell(d: Diff, where: str, o: dict, n: dict) -> None:
    was, now = o["status"], n["status"]
    if ERROR in (was, now):
        side = "both sides" if was == now else ("old side" if was == ERROR else "new side")
        reason = n["reason"] if now == ERROR else o["reason"]
        d.not_run.append(f"{where}: vlcheck could not run it on the {side}: {reason}")
        return
    if was in OK and now == "fail":
        d.regressions.append(f"{where}: {was} -> fail: {n['reason']}")
    elif was == "pass" and now == "declared deviation":
        d.regressions.append(f"{where}: pass -> declared deviation: {n['reason']}")
    elif (was == "fail" and now in OK) or (was == "declared deviation" and now == "pass"):
        d.fixed.append(f"{where}: {was} -> {now}" + (f": {n['reason']}" if n["reason"] else ""))
    elif was != "skip" and now == "skip":
        d.lost_coverage.append(f"{where}: {was} -> skip: {n['reason']}")
    old_facts, new_facts = _facts(o), _facts(n)
    d.moved += _moved_facts(where, old_facts, new_facts)
    for key in sorted(set(old_facts) ^ set(new_facts)):
        side = "new" if key in old_facts else "old"
        d.not_measured.append(f"{where}: {key}: not measured on the {side} side")


def _facts(row: dict) -> dict:
    return {k: v for k, v in row.get("data", {}).items() if not k.endswith("." + NOT_APPLIED)}


def _moved_facts(where: str, old: dict, new: dict) -> list[str]:
    out = []
    for key in sorted(set(old) & set(new)):
        if old[key] == new[key]:
            continue
        if isinstance(old[key], list) and all(isinstance(x, str) for x in old[key] + new[key]):
            lines = list(difflib.unified_diff(old[key], new[key], "old", "new", lineterm="", n=0))[2:]
            out.append(f"{where}: {key} changed:\n" + "\n".join("    " + line for line in lines[:20]))
        elif isinstance(old[key], dict) and isinstance(new[key], dict):
            out += [f"{where}: {key}.{k}: " + (f"{json.dumps(old[key][k])[:200]} -> {json.dumps(new[key][k])[:200]}"
                                               if k in old[key] and k in new[key] else
                                               "not measured on the " + ("new" if k in old[key] else "old") + " side")
                    for k in sorted(set(old[key]) | set(new[key])) if old[key].get(k) != new[key].get(k)]
        else:
            out.append(f"{where}: {key}: {json.dumps(old[key])[:200]} -> {json.dumps(new[key])[:200]}")
    return out


def _sections(d: Diff) -> list[tuple[str, list[str]]]:
    return [("regressions", d.regressions), ("could not run (vlcheck errors, not regressions)", d.not_run),
            ("fixed", d.fixed), ("lost coverage", d.lost_coverage), ("moved", d.moved),
            ("not measured", d.not_measured)]


def _environment_change(d: Diff, fmt) -> str:
    return ", ".join(fmt(k, d.old_env.get(k), d.new_env.get(k)) for k in ("vllm", "transformers", "torch")
                     if d.old_env.get(k) != d.new_env.get(k)) or "same vllm/transformers/torch"


def to_text(d: Diff) -> str:
    parts = [f"environment: {_environment_change(d, lambda k, a, b: f'{k} {a} -> {b}')}"]
    for title, items in _sections(d):
        parts.append(f"{title.upper() if title == 'regressions' else title} ({len(items)}):"
                     + "".join(f"\n  {i}" for i in items))
    parts.append(f"summary: {len(d.regressions)} regressions, {len(d.not_run)} not run, {len(d.fixed)} fixed, "
                 f"{len(d.lost_coverage)} lost coverage, {len(d.moved)} moved, {len(d.not_measured)} not measured")
    parts.append(f"verdict: {VERDICT_TEXT[d.verdict]}")
    return "\n".join(parts) + "\n"


def to_markdown(d: Diff) -> str:
    badge = {"SAFE": "✅ SAFE", "REGRESSED": "❌ REGRESSED", "INCONCLUSIVE": "⚠️ INCONCLUSIVE"}[d.verdict]
    lines = [f"## vlcheck diff: {badge}", "", _environment_change(d, lambda k, a, b: f"{k} `{a}` → `{b}`"), "",
             VERDICT_TEXT[d.verdict], ""]
    for title, items in _sections(d):
        if items:
            lines += [f"### {title[0].upper() + title[1:]} ({len(items)})", ""]
            lines += [f"- {i.splitlines()[0]}" + ("\n  ```\n" + "\n".join(i.splitlines()[1:]) + "\n  ```"
                                                   if len(i.splitlines()) > 1 else "") for i in items]
            lines.append("")
    return "\n".join(lines)
