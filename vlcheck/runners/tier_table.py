"""The GPU tier's result per family-config, as one table: test outcomes from each process's JUnit
XML, engine start seconds from its properties, wall seconds and exit code from `summary.txt`.

`vlcheck tier table gpu-out` (`vlcheck tier gpu` prints it at its end).
"""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from vlcheck.core import junit
from vlcheck.core.junit import OUTCOMES

START_PROPERTY = "engine_start_s"
SUMMARY_LINE = re.compile(r"^(?P<family>\S+) (?P<kind>\S+) rc=(?P<rc>-?\d+) (?P<wall>\d+)s")


@dataclass
class ConfigRow:
    config: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    engine_starts: list[float] = field(default_factory=list)
    wall_s: int | None = None
    rc: int | None = None


def read_junit(text: str, row: ConfigRow) -> None:
    for case in junit.cases(text):
        row.counts[case.outcome] += 1
        if START_PROPERTY in case.properties:
            row.engine_starts.append(float(case.properties[START_PROPERTY]))


def rows(out: Path) -> list[ConfigRow]:
    """From `out/logs/*.xml` (or `out/logs.tgz`) and `out/summary.txt`."""
    found: dict[str, ConfigRow] = {}
    summary = out / "summary.txt"
    for line in summary.read_text().splitlines() if summary.exists() else ():
        m = SUMMARY_LINE.match(line)
        if m:
            row = found.setdefault(f"{m['family']}-{m['kind']}", ConfigRow(f"{m['family']}-{m['kind']}"))
            row.wall_s, row.rc = int(m["wall"]), int(m["rc"])
    for name, text in _junit_files(out):
        config = Path(name).stem
        read_junit(text, found.setdefault(config, ConfigRow(config)))
    return sorted(found.values(), key=lambda r: r.config)


def _junit_files(out: Path):
    logs = out / "logs"
    if logs.is_dir():
        for path in sorted(logs.glob("*.xml")):
            yield path.name, path.read_text()
    elif (out / "logs.tgz").exists():
        with tarfile.open(out / "logs.tgz") as tar:
            for member in tar.getmembers():
                if member.name.endswith(".xml"):
                    yield member.name, tar.extractfile(member).read().decode()


def table(found: list[ConfigRow]) -> str:
    head = ["family-config", *OUTCOMES, "engine start s", "wall s", "rc"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in found:
        starts = " + ".join(f"{s:.0f}" for s in r.engine_starts) or "-"
        rc = "-" if r.rc is None else ("timeout" if r.rc == 124 else str(r.rc))
        wall = "-" if r.wall_s is None else str(r.wall_s)
        lines.append("| " + " | ".join([r.config, *(str(r.counts[o]) for o in OUTCOMES), starts, wall, rc]) + " |")
    totals = {o: sum(r.counts[o] for r in found) for o in OUTCOMES}
    lines.append("| **all** | " + " | ".join(str(totals[o]) for o in OUTCOMES)
                 + f" | {sum(len(r.engine_starts) for r in found)} starts | | |")
    return "\n".join(lines)
