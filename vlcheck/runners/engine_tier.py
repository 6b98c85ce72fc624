"""The engine tier's results per family-config, from its JUnit XML files (`scripts/cpu-engine-tier`,
`scripts/gpu-tier.sh`): engine start, passed / failed / xfailed / skipped, and whether vLLM agrees
with the transformers reference on the same seeded weights.

    vlcheck tier table cpu-engine-out/shard-*.xml
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from vlcheck.core import junit
from vlcheck.core.junit import OUTCOMES
from vlcheck.spec.schema import KINDS

CONFIG = re.compile(rf"\[(?:cpu|gpu)-(.+?-(?:{'|'.join(KINDS)}))(?:-|\])")
"""A test id's family-config: `test_x[cpu-blip-2-single]`, `test_y[cpu-aria-multi_image-content-hash]`."""
AGREEMENT_TEST = "test_vllm_matches_transformers_reference"
START_PROPERTY = "engine_start_s"


@dataclass
class ConfigRow:
    config: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    engine_start_s: str = "-"
    agreement: str = "-"
    first_problem: str = ""


def rows(documents: list[bytes]) -> dict[str, ConfigRow]:
    table: dict[str, ConfigRow] = {}
    for document in documents:
        for case in junit.cases(document):
            found = CONFIG.search(case.name)
            if found is None:
                continue
            config = found.group(1)
            row = table.setdefault(config, ConfigRow(config))
            row.counts[case.outcome] += 1
            if case.outcome in ("failed", "error") and not row.first_problem:
                row.first_problem = f"{case.name.split('[')[0]}: {case.message}"
            if START_PROPERTY in case.properties:
                row.engine_start_s = case.properties[START_PROPERTY]
            if case.name.startswith(AGREEMENT_TEST + "["):
                row.agreement = {"passed": "agree", "failed": "DIFFER", "error": "not compared (error)",
                                 "xfailed": "declared difference",
                                 "skipped": f"not compared ({case.message[:70]})"}[case.outcome]
    return dict(sorted(table.items()))


def markdown(table: dict[str, ConfigRow]) -> str:
    lines = ["| family-config | engine start (s) | " + " | ".join(OUTCOMES) + " | vLLM vs transformers | first failure |",
             "|---|---|" + "---|" * len(OUTCOMES) + "---|---|"]
    for r in table.values():
        lines.append(f"| {r.config} | {r.engine_start_s} | " + " | ".join(str(r.counts[o]) for o in OUTCOMES)
                     + f" | {r.agreement} | {r.first_problem.replace('|', '/')} |")
    total = {o: sum(r.counts[o] for r in table.values()) for o in OUTCOMES}
    agree = sum(r.agreement == "agree" for r in table.values())
    lines.append(f"\n{len(table)} family-configs: " + ", ".join(f"{total[o]} {o}" for o in OUTCOMES)
                 + f"; vLLM agrees with transformers on {agree}")
    return "\n".join(lines)


CONFIGURATION_TEST = "test_configuration"


def configuration_cells(documents: list[bytes]) -> dict[str, dict[str, str]]:
    """family-config -> configuration -> its outcome in a few words: `pass` with the proof
    counters, `skip` / `fail` / `declared` with the first line of why (tests/configurations/)."""
    import json

    table: dict[str, dict[str, str]] = {}
    for document in documents:
        for case in junit.cases(document):
            found = CONFIG.search(case.name)
            if not case.name.startswith(CONFIGURATION_TEST + "[") or found is None:
                continue
            configuration = case.name[found.end():].rstrip("]") or "?"
            if case.outcome == "skipped" and "no engine configuration selected" in case.message:
                continue
            proof = case.properties.get("proof")
            try:
                proof = json.loads(proof) if proof else None
            except ValueError:
                pass
            shown = ", ".join(f"{k} {v}" for k, v in proof.items()) if isinstance(proof, dict) else ""
            word = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "xfailed": "declared",
                    "skipped": "skip"}[case.outcome]
            why = _why(case.message, configuration, found.group(1))[:110] if case.outcome != "passed" else ""
            table.setdefault(found.group(1), {})[configuration] = " ".join(x for x in (word, f"({shown})" if shown else "", why) if x)
    return dict(sorted(table.items()))


def _why(message: str, configuration: str, family_config: str) -> str:
    """A cell's message without what the table's row and column already say."""
    message = re.sub(r"^(?:Failed: )?(?:\S+ \[\S+\] \S+: (?:fail|error|declared|skip): )?", "", message)
    for prefix in (f"{configuration} did not exercise its path: ", f"{configuration}: ",
                   f"{family_config.rsplit('-', 1)[0]}: "):
        message = message.removeprefix(prefix)
    return message


def configuration_markdown(table: dict[str, dict[str, str]]) -> str:
    names = sorted({c for row in table.values() for c in row})
    if not names:
        return ""
    lines = ["| family-config | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for config, row in table.items():
        lines.append(f"| {config} | " + " | ".join(row.get(n, "-").replace("|", "/") for n in names) + " |")
    counts = {n: {} for n in names}
    for row in table.values():
        for n, cell in row.items():
            word = cell.split(" ", 1)[0]
            counts[n][word] = counts[n].get(word, 0) + 1
    lines.append("\n" + "; ".join(f"{n}: " + ", ".join(f"{v} {k}" for k, v in sorted(c.items())) for n, c in counts.items()))
    return "\n".join(lines)


def write_engine_report(path: str, cells: dict, shard=None) -> None:
    """The engine tier's report cells (check name -> family -> {variant kind: CheckResult}) as a
    vlcheck report of those checks: the input of `vlcheck diff` (and of `vlcheck merge` for shards)."""
    import json

    from vlcheck.core.results import combine
    from vlcheck.gate import report
    from vlcheck.gate.checks import engine_check_named, unit
    from vlcheck.spec.registry import all_families

    families = all_families()
    results, informational = [], {}
    from vlcheck.runners.engine_cells import informational as test_facts

    every_fact = test_facts(cells)
    for check_name, by_family in sorted(cells.items()):
        try:
            informational[check_name] = list(engine_check_named(check_name).informational)
        except KeyError:  # an engine test's own cell (runners/engine_cells.py): its facts are shown, not compared
            informational[check_name] = every_fact[check_name]
        for name, by_variant in sorted(by_family.items()):
            cell = combine(name, check_name, list(by_variant.values()))
            cell.variants = {kind: unit(r) for kind, r in by_variant.items()}
            results.append(cell)
    named = {n for by_family in cells.values() for n in by_family}
    rep = report.build(results, sorted(cells), {n: families[n] for n in named if n in families},
                       informational=informational)
    if shard is not None:
        rep["shard"] = str(shard)
    Path(path).write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n")


def tables(documents: list[bytes]) -> str:
    """The engine tier's table per family-config, and the configurations' table where any ran."""
    text = markdown(rows(documents))
    configurations = configuration_markdown(configuration_cells(documents))
    if configurations:
        text += "\n\nEngine configurations: pass with the proof that the path ran, or why not\n\n" + configurations
    return text
