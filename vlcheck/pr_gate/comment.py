"""The pull-request comment and job summary made of a `vlcheck diff --json/--markdown` pair: one
comment per pull request, found again by its marker and updated in place, never a new one per push."""

from __future__ import annotations

import json
from pathlib import Path

MARKER = "<!-- vlcheck-gate -->"
LIMIT = 60_000
"""GitHub refuses a comment over 65,536 characters; what does not fit is in the uploaded report."""


def body(diff_json: str | Path, diff_markdown: str | Path, reports_url: str | None = None) -> str:
    """The comment: the marker, a one-line verdict with its exit code, the diff's Markdown (cut to
    fit, saying so) and where the full HTML reports are."""
    verdict = json.loads(Path(diff_json).read_text(encoding="utf-8"))
    markdown = Path(diff_markdown).read_text(encoding="utf-8")
    head = [MARKER, f"**vlcheck: {verdict['verdict']}** (exit {verdict['exit']}): {verdict['verdict_text']}", ""]
    tail = ["", f"Full reports (HTML, JSON): {reports_url}" if reports_url else
            "Full reports (HTML, JSON): this run's `vlcheck-reports` artifact"]
    room = LIMIT - len("\n".join(head + tail)) - 200
    if len(markdown) > room:
        markdown = markdown[:room].rsplit("\n", 1)[0] + "\n\n… cut to fit a comment: the full diff is in the reports below."
    return "\n".join([*head, markdown.rstrip(), *tail]) + "\n"


def summary(diff_json: str | Path) -> str:
    """The job summary: the verdict and what decided it, as a table."""
    verdict = json.loads(Path(diff_json).read_text(encoding="utf-8"))
    rows = [("verdict", f"{verdict['verdict']} (exit {verdict['exit']})"), ("summary", verdict["summary"]),
            ("causes", verdict["causes_summary"])]
    rows += [(f"cause {i}", f"[{c['whose']}] {c['title']} ({len(c['cells'])} cells; first bad: {c['first_bad'] or '-'})")
             for i, c in enumerate(verdict["causes"][:10], 1)]
    lines = ["## vlcheck gate", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {str(v).replace('|', '/')} |" for k, v in rows]
    return "\n".join(lines) + "\n"
