"""`vlcheck merge`: the reports of several shards (`vlcheck check --shard i/n`) as one report.

The merged report is what one runner running every family would have written: the same
family x check matrix, the summary counted from its cells, one environment. It is the input of
`vlcheck diff` like any other report. Merging refuses, with the cell or the field named,
anything that would make that claim false: reports of different schemas, environments or check
lists, a cell present in two reports, a shard given twice or missing. Statuses are copied as
they are, whatever their name.
"""

from __future__ import annotations

import datetime
from typing import Any

ENVIRONMENT_MAY_DIFFER = ("platform",)
"""The kernel release in `platform` differs between CI hosts of one image; the packages may not."""


class MergeError(ValueError):
    """The reports cannot be one report; the message names what disagrees and where."""


def merge(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One report from `{name (e.g. the file): report}`, at least one."""
    if not reports:
        raise MergeError("nothing to merge")
    (first_name, first), *rest = reports.items()
    for name, rep in rest:
        for field in ("schema", "checks"):
            if rep.get(field) != first.get(field):
                raise MergeError(f"{field} differs: {first_name} has {first.get(field)!r}, {name} has {rep.get(field)!r}")
        _same_environment(first_name, first["environment"], name, rep["environment"])
    _shards_complete(reports)

    families: dict[str, dict[str, Any]] = {}
    cell_from: dict[tuple[str, str], str] = {}
    for name, rep in reports.items():
        for family, row in rep["families"].items():
            merged = families.setdefault(family, {**{k: v for k, v in row.items() if k != "checks"}, "checks": {}})
            for key in row.keys() - {"checks"}:
                if merged.get(key) != row[key]:
                    raise MergeError(f"{family}: {key} differs between reports ({merged.get(key)!r} vs {row[key]!r} in {name})")
            for check, cell in row["checks"].items():
                if (family, check) in cell_from:
                    same = "the same" if merged["checks"][check] == cell else "a conflicting"
                    raise MergeError(f"{family} {check}: in {cell_from[family, check]} and in {name} ({same} result): "
                                     "a cell must come from one shard")
                cell_from[family, check] = name
                merged["checks"][check] = cell
    for row in families.values():  # a row put together from two reports: cells in check order
        row["checks"] = {c: row["checks"][c] for c in [*first["checks"], *row["checks"]] if c in row["checks"]}
    order = sorted(families, key=lambda n: (n.lower(), n))  # the registry's order, case-insensitive
    statuses = dict.fromkeys(s for rep in reports.values() for s in rep.get("summary", {}))
    cells = [cell["status"] for row in families.values() for cell in row["checks"].values()]
    statuses.update(dict.fromkeys(cells))
    environment = dict(first["environment"])
    for key in ENVIRONMENT_MAY_DIFFER:
        values = list(dict.fromkeys(str(rep["environment"].get(key)) for rep in reports.values()))
        if len(values) > 1:
            environment[key] = " | ".join(values)
    return {
        "schema": first["schema"],
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment,
        "checks": first["checks"],
        "informational": first.get("informational", {}),
        "tolerances": first.get("tolerances", {}),
        "summary": {s: cells.count(s) for s in statuses},
        "families": {n: families[n] for n in order},
        "merged_from": [{"report": name, "created": rep.get("created"), "shard": rep.get("shard"),
                         "families": len(rep["families"])} for name, rep in reports.items()],
    }


def _same_environment(a_name: str, a: dict, b_name: str, b: dict) -> None:
    differing = sorted(k for k in a.keys() | b.keys() if k not in ENVIRONMENT_MAY_DIFFER and a.get(k) != b.get(k))
    if differing:
        detail = "; ".join(f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in differing)
        raise MergeError(f"different environments ({a_name} vs {b_name}): {detail}")


def _shards_complete(reports: dict[str, dict]) -> None:
    """Reports written with --shard say so: then they must be shards 1..n of one n, once each."""
    shards = {name: rep.get("shard") for name, rep in reports.items()}
    if not any(shards.values()):
        return
    if not all(shards.values()):
        raise MergeError("some reports are shards and some are not: "
                         + ", ".join(f"{n}: {s or 'unsharded'}" for n, s in shards.items()))
    counts = {s.split("/")[1] for s in shards.values()}
    if len(counts) > 1:
        raise MergeError(f"shards of different splits: {', '.join(f'{n}: {s}' for n, s in shards.items())}")
    count = int(counts.pop())
    seen: dict[str, str] = {}
    for name, shard in shards.items():
        if shard in seen:
            raise MergeError(f"shard {shard} given twice: {seen[shard]} and {name}")
        seen[shard] = name
    missing = [f"{i}/{count}" for i in range(1, count + 1) if f"{i}/{count}" not in seen]
    if missing:
        raise MergeError(f"missing shard {', '.join(missing)}: the merged report would lack their families")
