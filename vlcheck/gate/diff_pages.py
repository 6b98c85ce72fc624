"""`vlcheck diff`'s outputs for machines and for a browser: `--json` (the verdict, the causes and every
cell, what a CI job or a bot reads) and `--html` (one self-contained page: the causes, then each
cell's old and new facts side by side, the first differing leaf highlighted)."""

from __future__ import annotations

import html
import json
from typing import Any

from vlcheck.core.results import frame_text, frames_text
from vlcheck.gate import causes as causes_
from vlcheck.gate.diff import VERDICT_TEXT, Change, Diff, causes_summary, environment_notes, summary

SCHEMA = 1


def _change(c: Change) -> dict[str, Any]:
    return {"family": c.family, "check": c.check, "fact": c.fact, "old": c.old, "new": c.new, "note": c.note}


def to_json(d: Diff) -> dict[str, Any]:
    return {
        "schema": SCHEMA, "verdict": d.verdict, "exit": d.exit_code, "verdict_text": VERDICT_TEXT[d.verdict],
        "environment": {"baseline": d.old_env, "candidate": d.new_env},
        "environment_notes": environment_notes(d),
        "summary": summary(d), "causes_summary": causes_summary(d),
        "causes": [c.to_json() for c in d.causes],
        "regressions": [_change(c) for c in d.regressions],
        "new_failures": [_change(c) for c in d.new_failures],
        "not_run": d.not_run,
        "lost_coverage": [_change(c) for c in d.lost_coverage],
        "moved": [_change(c) for c in d.moved],
        "accepted": [{**_change(c), "reason": reason} for c, reason in d.accepted],
        "accepted_unseen": d.accepted_unseen, "fixed": d.fixed, "remeasure": d.remeasure, "gained": d.gained,
        "speed": d.speed,
        "compared": d.compared,
    }


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """A JSON value as path -> leaf (`["single.token_counts"]["image x1"].prompt_tokens`)."""
    if isinstance(value, dict) and value:
        return {p: v for k, item in value.items() for p, v in leaves(item, f"{path}[{json.dumps(k)}]").items()}
    if isinstance(value, list) and value:
        return {p: v for i, item in enumerate(value) for p, v in leaves(item, f"{path}[{i}]").items()}
    return {path or "(value)": value}


def side_by_side(old: dict, new: dict) -> tuple[list[tuple[str, Any, Any]], str | None]:
    """Rows (path, old, new) of two cells' facts, and the first path where they differ."""
    a, b = leaves(old), leaves(new)
    paths = [*a, *(p for p in b if p not in a)]
    rows = [(p, a.get(p, _ABSENT), b.get(p, _ABSENT)) for p in paths]
    first = next((p for p, x, y in rows if x != y), None)
    return rows, first


_ABSENT = object()
CONTEXT = 3
"""Equal rows kept around each differing one; the rest fold into "... N equal"."""


def _cell_view(report: dict, family: str, label: str) -> dict:
    cell, unit, kind = causes_.locate(report, family, label)
    if cell is None:
        return {}
    facts = {k: v for k, v in (cell.get("data") or {}).items() if kind is None or k.startswith(f"{kind}.")}
    view = {"status": unit.get("status"), "reason": unit.get("reason", ""), "finding": unit.get("finding", "")}
    if unit.get("frames"):
        view["frames"] = [frame_text(f) for f in unit["frames"]]
    return {**view, "facts": facts}


def _value(v: Any) -> str:
    return "<i>absent</i>" if v is _ABSENT else html.escape(json.dumps(v, ensure_ascii=False))


def _table(old: dict, new: dict) -> str:
    rows, first = side_by_side(old, new)
    differing = [i for i, (_, a, b) in enumerate(rows) if a != b]
    keep = {j for i in differing for j in range(i - CONTEXT, i + CONTEXT + 1)}
    out, skipped = [], 0
    for i, (path, a, b) in enumerate(rows):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            out.append(f'<tr class="fold"><td colspan="3">… {skipped} equal</td></tr>')
            skipped = 0
        cls = ' class="first"' if path == first else (' class="diff"' if a != b else "")
        anchor = ' id="first"' if path == first else ""
        out.append(f"<tr{cls}{anchor}><td><code>{html.escape(path)}</code></td><td>{_value(a)}</td>"
                   f"<td>{_value(b)}</td></tr>")
    if skipped:
        out.append(f'<tr class="fold"><td colspan="3">… {skipped} equal</td></tr>')
    if not differing:
        out.append('<tr class="fold"><td colspan="3">old and new facts are equal</td></tr>')
    return ('<table class="cell"><tr><th>fact</th><th>baseline</th><th>candidate</th></tr>'
            + "".join(out) + "</table>")


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;max-width:1400px;color:#1b1f24}
h1 .v{padding:2px 10px;border-radius:6px;color:#fff}
.SAFE{background:#1a7f37}.REGRESSED,.FAILING{background:#cf222e}.INCONCLUSIVE,.INCOMPLETE{background:#9a6700}
.CHANGED{background:#0969da}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #d0d7de;padding:3px 8px;vertical-align:top;
text-align:left}th{background:#f6f8fa}table.cell td{max-width:560px;overflow-wrap:anywhere;font-size:12.5px}
tr.diff td{background:#fff8c5}tr.first td{background:#ffcecb;font-weight:600}tr.fold td{color:#57606a;font-style:italic}
code{font-size:12px}details{margin:6px 0 14px}summary{cursor:pointer}.muted{color:#57606a}
"""


def to_html(d: Diff) -> str:
    esc = html.escape
    env = ", ".join(f"{k} {esc(str(d.old_env.get(k)))} → {esc(str(d.new_env.get(k)))}"
                    for k in ("vllm", "transformers", "torch"))
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>vlcheck diff: {d.verdict}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>vlcheck diff: <span class='v {d.verdict}'>{d.verdict}</span> <small>(exit {d.exit_code})</small></h1>",
             f"<p>{esc(VERDICT_TEXT[d.verdict])}</p><p class='muted'>{env}<br>{esc(summary(d))}</p>",
             *[f"<p class='muted'>{esc(line)}</p>" for line in environment_notes(d)]]
    if d.causes:
        parts.append(f"<h2>Causes ({esc(causes_summary(d))})</h2><table><tr><th>#</th><th>whose</th><th>cause</th>"
                     "<th>cells</th><th>families</th><th>first bad</th></tr>")
        for i, c in enumerate(d.causes, 1):
            frames = ("<br><code>" + esc(frames_text(c.frames)) + "</code>"
                      if c.frames else "")
            parts.append(f"<tr><td><a href='#cause-{i}'>{i}</a></td><td>{esc(c.whose)}<br><span class='muted'>"
                         f"{esc(c.why_whose)}</span></td><td>{esc(c.title)}{frames}</td><td>{len(c.cells)}</td>"
                         f"<td>{esc(', '.join(c.families))}</td><td>{esc(c.first_bad or '-')}</td></tr>")
        parts.append("</table>")
        for i, c in enumerate(d.causes, 1):
            parts.append(f"<h3 id='cause-{i}'>{i}. {esc(c.title)}</h3>")
            for n, cell in enumerate(c.cells):
                old = _cell_view(d.old_report, cell.family, cell.label)
                new = _cell_view(d.new_report, cell.family, cell.label)
                opened = " open" if n == 0 else ""  # one example per cause shown; the rest a click away
                parts.append(f"<details{opened}><summary><b>{esc(cell.family)} {esc(cell.label)}</b> "
                             f"<span class='muted'>({esc(cell.category)}: {esc(str(old.get('status', 'absent')))} → "
                             f"{esc(str(new.get('status', 'absent')))})</span></summary>{_table(old, new)}</details>")
    moved = [c for c in d.moved if c.fact != "finding"]
    if moved:
        parts.append(f"<h2>Moved facts ({len(moved)})</h2>")
        for c in moved:
            parts.append(f"<details><summary><b>{esc(c.family)} {esc(c.check)}</b>: <code>{esc(c.fact)}</code></summary>"
                         f"{_table({'value': c.old}, {'value': c.new})}</details>")
    for title, items in (("Lost coverage", [x.text() for x in d.lost_coverage]), ("Could not run", d.not_run),
                         ("Accepted", [f"{x.text()} — {r}" for x, r in d.accepted]), ("Fixed", d.fixed),
                         ("Re-measure", d.remeasure), ("Gained coverage", d.gained)):
        if items:
            parts.append(f"<h2>{title} ({len(items)})</h2><ul>"
                         + "".join(f"<li><pre>{esc(i)}</pre></li>" for i in items) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
