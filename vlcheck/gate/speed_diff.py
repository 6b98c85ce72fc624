"""`vlcheck diff OLD NEW --speed AB.json`: a `vlcheck speed ab` run of the same two versions joins
the verdict. A family-config it found SLOWER (beyond the two environments' measured noise, on one
machine) is a regression of cell `speed.<metric>`, acceptable like any other; what it found the same
or faster is listed. Where its two environments answered from different machines, nothing is
decided: the ratios are listed as reported. A speed run of other code than the two reports measured
is refused, by content (the packages' digests) and by version: its verdict would be about other code."""

from __future__ import annotations

import json
from pathlib import Path

from vlcheck.gate.diff import Change, Diff, ReportError

VERSION_KEYS = ("vllm", "transformers")
CODE_KEYS = ("vllm", "transformers", "torch")


def load(path: str) -> dict:
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReportError(f"{path}: not a `vlcheck speed ab --json` report ({err})") from err
    if not isinstance(report, dict) or "family_configs" not in report or "environments" not in report:
        raise ReportError(f"{path}: not a `vlcheck speed ab --json` report (no environments / family_configs)")
    return report


def check_same_code(d: Diff, report: dict, path: str) -> None:
    for side, env in (("baseline", d.old_env), ("candidate", d.new_env)):
        timed = report["environments"][side]
        versions = timed.get("versions", {})
        other = [f"{k} {versions.get(k)} where the report has {env.get(k)}" for k in VERSION_KEYS
                 if versions.get(k) != env.get(k)]
        measured = {k: (e or {}).get("digest") for k, e in (env.get("code") or {}).items()}
        other += [f"{k} code {timed['code'][k][:12]} where the report measured {measured[k][:12]}" for k in CODE_KEYS
                  if measured.get(k) and (timed.get("code") or {}).get(k) and timed["code"][k] != measured[k]]
        if other:
            raise ReportError(f"{path}: its {side} timed {', '.join(other)}: a speed run of other code says nothing "
                              "about these reports")


def add(d: Diff, report: dict, path: str) -> None:
    check_same_code(d, report, path)
    decided = report.get("same_machine", False)
    lines = [] if decided else ["the two environments answered from different machines: reported, not decided"]
    for r in report["family_configs"]:
        name = f"{r['family']}-{r['variant']}"
        if not r["comparisons"]:
            lines.append(f"{name}: not timed: {'; '.join(f'{s}: {why}' for s, why in r['skip'].items())[:200]}")
        for c in r["comparisons"]:
            words = (f"x{c['ratio']} ({1000 * c['baseline_s']:.2f} -> {1000 * c['candidate_s']:.2f} ms per call, "
                     f"band x{c['threshold']})")
            if decided and c["verdict"] == "SLOWER":
                d.regressions.append(Change(r["family"], f"speed.{c['metric']}", f"{r['variant']}.seconds_per_call",
                                            c["baseline_s"], c["candidate_s"],
                                            note=f"SLOWER {words}: beyond its noise, `vlcheck speed ab` {path}"))
            else:
                lines.append(f"{name} {c['metric']}: {c['verdict'] if decided else 'reported'} {words}")
    d.speed = lines
