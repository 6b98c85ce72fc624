"""The upgrade report: environment + a family x check matrix, as JSON, Markdown and HTML.

The JSON is the record `vlcheck diff` compares; Markdown fits a pull-request comment; the HTML is
one self-contained file (no network) with a colour per cell, status filters, and a link from
every failing or skipped cell to its detail.
"""

from __future__ import annotations

import datetime
import html
import json
import platform
import sys
from importlib import metadata
from typing import Any

from vlcheck.core.results import CheckResult, Status, frames_text
from vlcheck.gate.ran_on import not_its_release

SCHEMA = 3
"""2: the `error` status (vlcheck could not run the check), apart from `fail`. 3: per cell, its
family-configs (`variants`) and what a failure measured (`finding`); per report, the facts each
check records without comparing them (`informational`) and how far its numbers may move (`tolerances`)."""
STATUS_COLOURS = {"pass": "#c8e6c9", "declared deviation": "#fff3b0", "fail": "#ffcdd2", "error": "#d1c4e9",
                  "skip": "#e0e0e0"}
STATUS_SYMBOLS = {"pass": "✅", "declared deviation": "🟡", "fail": "❌", "error": "💥", "skip": "⏭️"}


def environment(adapter_description: dict[str, str] | None = None) -> dict[str, Any]:
    """`adapter_description`: `vlcheck.adapter.describe()` as measured elsewhere (a worker, the result store)."""
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for dist in ("vllm", "transformers", "torch", "huggingface_hub", "vlcheck"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    from vlcheck.core.versions import installed, vllm_build

    env["vllm"], env["vllm_build"] = installed()["vllm"], vllm_build()
    from vlcheck.core.installed_code import identities

    env["code"] = {package: ident.as_json() for package, ident in identities().items()}
    from vlcheck import adapter

    env["vllm_adapter"] = adapter_description if adapter_description is not None else adapter.describe()
    from vlcheck.core.file_clashes import installed_file_clashes

    try:
        env["file_clashes"] = [c.line() for c in installed_file_clashes()]
    except Exception as err:  # noqa: BLE001 - a malformed RECORD must not cost the report
        env["file_clashes"] = [f"(the installed distributions' file lists could not be read: {type(err).__name__}: {err})"]
    from vlcheck.core.devices import cpu_kernels, gpu_name

    env["gpu"] = gpu_name()
    env["cpu_kernels"] = cpu_kernels()  # vLLM's CPU build runs other kernels per class: its goldens are per class
    return env


def as_json(value: Any) -> Any:
    """Facts as a report holds them (tuples -> lists, anything else JSON cannot hold -> str): a live
    result compared with a report's cell must be read the same way."""
    return json.loads(json.dumps(value, default=str))



def cell_of(r: CheckResult) -> dict[str, Any]:
    """A result as a report holds it (what `vlcheck diff` compares)."""
    cell = {"status": r.status.value, "reason": r.reason, "finding": r.finding, "details": r.details,
            "data": as_json(r.data)}
    if r.variants:
        cell["variants"] = r.variants
    if r.frames:  # where the exception behind it was raised (core.results.frames_of): read, never compared
        cell["frames"] = as_json(r.frames)
    return cell


def result_of(family: str, check: str, cell: dict[str, Any]) -> CheckResult:
    """A report's cell as the result it was made of (`cell_of`, read back)."""
    return CheckResult(family, check, Status(cell["status"]), cell.get("reason", ""), list(cell.get("details", [])),
                       dict(cell.get("data", {})), cell.get("finding", ""), dict(cell.get("variants", {})),
                       frames=list(cell.get("frames", [])))


def build(results: list[CheckResult], checks: list[str], families: dict[str, Any],
          unloadable: list[str] = (), informational: dict[str, list[str]] | None = None,
          tolerances: dict[str, float] | None = None, adapter_description: dict[str, str] | None = None) -> dict[str, Any]:
    """The report of `results`; `unloadable` names families whose spec file does not load;
    `informational`: per check, facts recorded but not compared (`gate.checks.informational_facts`);
    `adapter_description`: see `environment`."""
    matrix: dict[str, dict[str, Any]] = {}
    for name, spec in families.items():
        matrix[name] = {"title": spec.title, "model": spec.model, "checks": {}}
    for name in unloadable:
        matrix[name] = {"title": name, "model": "(spec does not load)", "checks": {}}
    matrix = dict(sorted(matrix.items(), key=lambda kv: kv[0].lower()))
    for r in results:
        matrix[r.family]["checks"][r.check] = cell_of(r)
    counts = {s.value: sum(r.status is s for r in results) for s in Status}
    return {"schema": SCHEMA, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "environment": environment(adapter_description), "checks": checks, "informational": informational or {},
            "tolerances": tolerances or {},
            "summary": counts, "families": matrix}


def cells_with(report: dict, status: str) -> list[tuple[str, str, str]]:
    """(family, check, reason) of every cell with this status."""
    return [(fam, check, cell["reason"]) for fam, row in report["families"].items()
            for check, cell in row["checks"].items() if cell["status"] == status]


def deviations(report: dict) -> list[tuple[str, str, str]]:
    return cells_with(report, Status.DEVIATION.value)


def to_markdown(report: dict) -> str:
    env = report["environment"]
    checks = report["checks"]
    shadowed = not_its_release(env)
    lines = ["## vlcheck report", "",
             " · ".join(f"{k} `{env.get(k)}`" for k in ("vllm", "transformers", "torch", "python", "gpu")), "",
             *[f"- ⚠️ files installed twice: {line}" for line in env.get("file_clashes") or ()],
             *[f"- ⚠️ not its release's files: {line}" for line in shadowed],
             *([""] if env.get("file_clashes") or shadowed else []),
             "| status | count |", "|---|---|"]
    lines += [f"| {s} | {n} |" for s, n in report["summary"].items()]
    lines += ["", "| family | " + " | ".join(checks) + " |", "|---|" + "---|" * len(checks)]
    for fam, row in report["families"].items():
        cells = [STATUS_SYMBOLS.get(row["checks"].get(c, {}).get("status", ""), "") for c in checks]
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    for status, title in (("fail", "Failures (vLLM or transformers behaviour)"),
                          ("error", "Errors (vlcheck could not run the check: not a vLLM finding)")):
        cells = cells_with(report, status)
        if cells:
            lines += ["", f"### {title}", ""] + [f"- **{f}** {c}: {r}" for f, c, r in cells]
    devs = deviations(report)
    if devs:
        lines += ["", "### Declared deviations", ""] + [f"- **{f}** {c}: {r}" for f, c, r in devs]
    return "\n".join(lines) + "\n"


def _env_value(key: str, value: Any) -> str:
    if key == "code" and isinstance(value, dict):  # one line per package: version, where from, how installed
        from vlcheck.core.installed_code import from_json

        return "<br>".join(html.escape(f"{from_json(v).line()} · {from_json(v).digest[:12]}") for v in value.values())
    return html.escape(str(value))


def to_html(report: dict) -> str:
    """One self-contained page: inline CSS and JS, nothing fetched."""
    env, checks = report["environment"], report["checks"]
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in checks)
    rows, details = [], []
    for fam, row in report["families"].items():
        statuses = {row["checks"].get(c, {}).get("status", "") for c in checks}
        cells = []
        for c in checks:
            cell = row["checks"].get(c)
            if cell is None:
                cells.append("<td></td>")
                continue
            anchor = f"d-{fam}-{c}"
            label = esc(cell["status"])
            if cell["status"] != "pass":
                label = f'<a href="#{esc(anchor)}">{label}</a>'
                body = "".join(f"<pre>{esc(str(d))}</pre>" for d in cell["details"][:20])
                if cell.get("frames"):
                    body += f'<p class="frames">raised at: {esc(frames_text(cell["frames"]))}</p>'
                details.append(f'<section id="{esc(anchor)}" class="detail" data-status="{esc(cell["status"])}">'
                               f'<h3>{esc(fam)} · {esc(c)} · {esc(cell["status"])}</h3>'
                               f'<p>{esc(cell["reason"])}</p>{body}</section>')
            cells.append(f'<td class="cell" style="background:{STATUS_COLOURS.get(cell["status"], "#fff")}" '
                         f'title="{esc(cell["reason"])}">{label}</td>')
        rows.append(f'<tr data-statuses="{esc("|".join(sorted(statuses)))}"><th class="fam">{esc(fam)}'
                    f'<div class="model">{esc(row["model"])}</div></th>{"".join(cells)}</tr>')
    summary = " ".join(f'<button data-filter="{esc(s)}" style="background:{STATUS_COLOURS.get(s, "#fff")}">'
                       f'{esc(s)}: <b class="count" data-status="{esc(s)}">{n}</b></button>'
                       for s, n in report["summary"].items())
    env_rows = "".join(f"<tr><th>{esc(k)}</th><td>{_env_value(k, v)}</td></tr>" for k, v in env.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>vlcheck report</title>
<style>
body{{font-family:system-ui,sans-serif;margin:1.5em;color:#222}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}} .model{{font-weight:normal;color:#666;font-size:11px}}
button{{border:1px solid #999;border-radius:4px;padding:4px 10px;margin-right:6px;cursor:pointer}}
button.active{{outline:2px solid #333}} pre{{background:#f6f6f6;padding:6px;white-space:pre-wrap}}
.detail{{border-top:1px solid #ddd;margin-top:1em}} a{{color:inherit}}
</style></head><body>
<h1>vlcheck report</h1>
<p>Created {esc(report["created"])}.</p>
<table class="env">{env_rows}</table>
<h2>Families × checks</h2>
<p>Show rows with: <button data-filter="all" class="active">all ({len(report["families"])})</button>{summary}</p>
<table id="matrix"><thead><tr><th>family</th>{head}</tr></thead><tbody>
{"".join(rows)}
</tbody></table>
<h2>Details</h2>
{"".join(details) or "<p>No failures, errors, skips or deviations.</p>"}
<script>
document.querySelectorAll("button[data-filter]").forEach(b => b.addEventListener("click", () => {{
  document.querySelectorAll("button[data-filter]").forEach(x => x.classList.remove("active"));
  b.classList.add("active");
  const f = b.dataset.filter;
  document.querySelectorAll("#matrix tbody tr").forEach(tr => {{
    tr.style.display = (f === "all" || tr.dataset.statuses.split("|").includes(f)) ? "" : "none";
  }});
}}));
</script>
</body></html>
"""
