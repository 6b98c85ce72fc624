"""The A/B run as a page a person looks at: per family-config and metric, the candidate/baseline
ratio on a log axis with the band it had to leave (exp(+-FACTOR x noise)), SLOWER in red."""

from __future__ import annotations

import html
import math

LOW, HIGH = 0.5, 2.0
WIDTH, ROW, LEFT = 420, 18, 300
COLOURS = {"SLOWER": "#c0392b", "FASTER": "#1e8449", "same": "#555", "undecided": "#999"}


def _x(ratio: float) -> float:
    r = min(max(ratio, LOW), HIGH)
    return LEFT + WIDTH * (math.log(r) - math.log(LOW)) / (math.log(HIGH) - math.log(LOW))


def render(report: dict) -> str:
    rows = [(f"{r['family']}-{r['variant']} {c['metric']}", c) for r in report["family_configs"] for c in r["comparisons"]]
    height = ROW * (len(rows) + 2)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 200}" height="{height}" font-size="12" '
           'font-family="sans-serif">']
    for tick in (0.5, 0.75, 1.0, 1.5, 2.0):
        x = _x(tick)
        svg.append(f'<line x1="{x:.1f}" y1="{ROW}" x2="{x:.1f}" y2="{height}" stroke="#ddd"/>'
                   f'<text x="{x:.1f}" y="{ROW - 4}" text-anchor="middle">x{tick}</text>')
    for i, (label, c) in enumerate(rows, start=1):
        y = ROW * (i + 0.5)
        lo, hi = _x(1 / c["threshold"]), _x(c["threshold"])
        colour = COLOURS.get(c["verdict"], "#555")
        svg.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{html.escape(label)}</text>'
                   f'<rect x="{lo:.1f}" y="{y - 4:.1f}" width="{hi - lo:.1f}" height="8" fill="#eee"/>'
                   f'<circle cx="{_x(c["ratio"]):.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>'
                   f'<text x="{LEFT + WIDTH + 10}" y="{y + 4:.1f}" fill="{colour}">x{c["ratio"]} {c["verdict"]}</text>')
    svg.append("</svg>")
    envs = report["environments"]
    head = " vs ".join(f"{side} {html.escape(e['path'])} (vllm {e['versions'].get('vllm')}, transformers "
                       f"{e['versions'].get('transformers')})" for side, e in envs.items())
    machine = envs["baseline"]["machine"]
    note = ("" if report["same_machine"] else "<p><b>Different machines: reported, not decided.</b></p>")
    return (f"<!doctype html><meta charset='utf-8'><title>vlcheck speed</title><h1>vlcheck speed</h1>"
            f"<p>{head}</p><p>machine: {html.escape(machine['cpu'])}, {machine['cores']} cores"
            f"{', ' + html.escape(machine['gpu']) if machine.get('gpu') else ''}; {report['sessions']} sessions of "
            f"{report['rounds']} rounds (ABBA) of {report['repeats']} calls; the grey band: within noise (x 1/threshold to x threshold)</p>"
            f"{note}{''.join(svg)}")
