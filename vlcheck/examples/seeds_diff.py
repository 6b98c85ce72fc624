"""`vlcheck seeds diff SCRIPT...`: does the catalogue follow vLLM's examples? An example script (a newer
`vision_language.py`, `vision_language_multi_image.py` or `audio_language.py`) read against the specs:
the families it has and no spec has, the specs it no longer has, and the specs whose model, prompt,
engine args, stops or modalities differ from what its function does now (`seed_check.compare`, the
same comparison the prompt-format tests run against each spec's own seed)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from vlcheck.examples import seeds
from vlcheck.spec.schema import KINDS


def kind_of(script: Path) -> str:
    """Which of a spec's variants the script's examples are, by vLLM's file names."""
    name = script.name
    return "multi_image" if "multi_image" in name else "audio" if name.startswith("audio") else "single"


@dataclass
class ScriptDiff:
    script: str
    kind: str
    families: int = 0
    new: list[str] = field(default_factory=list)
    """In the script, without a spec (or, for audio, without a spec that takes audio)."""
    gone: list[str] = field(default_factory=list)
    """A spec's variant of this kind that the script no longer has."""
    drifted: dict[str, list[str]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return not (self.new or self.gone or self.drifted)

    def text(self, limit: int = 3) -> str:
        lines = [f"{self.script} ({self.kind}, {self.families} families): {len(self.new)} without a spec, "
                 f"{len(self.gone)} gone, {len(self.drifted)} drifted, {len(self.unchanged)} unchanged"]
        if self.new:
            lines.append("  without a spec: " + ", ".join(self.new))
        if self.gone:
            lines.append("  gone from the script: " + ", ".join(self.gone))
        for family, problems in self.drifted.items():
            lines.append(f"  drifted: {family}: " + "; ".join(p.split(": ", 1)[-1] for p in problems[:limit])
                         + (f" (+{len(problems) - limit} more)" if len(problems) > limit else ""))
        return "\n".join(lines)


def diff(script: Path, families: dict, kind: str | None = None) -> ScriptDiff:
    from vlcheck.examples.seed_check import compare

    kind = kind or kind_of(script)
    found = seeds.example_map(str(script))
    if not found:
        raise ValueError(f"{script}: no model_example_map could be read (not one of vLLM's example scripts, or it "
                         "does not run with vLLM stubbed out)")
    out = ScriptDiff(str(script), kind, len(found))
    for name, function in sorted(found.items()):
        spec = families.get(name)
        variant = _variant(spec, kind) if spec is not None else None
        if variant is None:
            out.new.append(name)
            continue
        if variant.source is None:  # the user's own model: no example to follow
            continue
        moved = dataclasses.replace(variant, source=dataclasses.replace(variant.source, seed=str(script), function=function))
        try:
            problems = compare(spec, moved)
        except Exception as err:  # noqa: BLE001 - an example that no longer runs against the spec is a drift too
            problems = [f"{name}: the example does not run against the spec: {type(err).__name__}: {err}"]
        if problems:
            out.drifted[name] = problems
        else:
            out.unchanged.append(name)
    out.gone = sorted(name for name, spec in families.items()
                      if name not in found and (v := _variant(spec, kind)) is not None and v.source is not None)
    return out


def _variant(spec, kind: str):
    if kind == "audio":
        return next((v for v in spec.variants if "audio" in v.modalities), None)
    return next((v for v in spec.variants if v.kind == kind), None)
