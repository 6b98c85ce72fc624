"""Which tensor-parallel sizes a family-config's TP-ready synthetic checkpoint can be split into.

vLLM splits every attention layer's heads, and every MLP's intermediate columns, evenly over the
tensor-parallel ranks; key-value heads may instead be replicated when there are fewer of them
than ranks (the rank count must then be a multiple of them). The default synthetic checkpoint
has 2 attention heads; `synthetic.checkpoint_dir(..., heads=TP_READY_HEADS)` builds one with 8.
`plan` reads its saved config and says, per TP size, which counts stand in the way, so that a
family that cannot be split is known on CPU and skips on the GPU with that reason.

`vlcheck tier tp` prints the sizes for every family-config, and with `--results gpu-out/logs.tgz`
the table of a GPU tier run's configurations held to TP=1 (`configurations.sharded.results_table`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from vlcheck.checkpoints.synthetic import TP_HEAD_KEYS, TP_INTERMEDIATE_KEYS, TP_KV_HEAD_KEYS, NotBuildable, checkpoint_dir
from vlcheck.spec.schema import FamilySpec, Variant, config_id

TP_READY_HEADS = 8
TP_SIZES = (2, 4, 8)
HEAD_KEYS = TP_HEAD_KEYS | {"n_head", "n_heads", "attention_heads"}
"""Attention head counts under every name the configs use, not only those the builder scales."""
KV_HEAD_KEYS = TP_KV_HEAD_KEYS | {"num_kv_heads", "n_kv_heads"}


def sharded_counts(config: Any, path: str = "") -> Iterator[tuple[str, str, int]]:
    """(dotted key, kind, value) of every head count and intermediate size in a saved config;
    kind is `heads`, `kv_heads` or `intermediate` (a per-layer list counts each entry)."""
    if isinstance(config, dict):
        for key, value in config.items():
            where = f"{path}.{key}" if path else key
            values = value if isinstance(value, list) and all(isinstance(v, int) for v in value) else [value]
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                    continue
                if key in HEAD_KEYS:
                    yield where, "heads", v
                elif key in KV_HEAD_KEYS:
                    yield where, "kv_heads", v
                elif key in TP_INTERMEDIATE_KEYS:
                    yield where, "intermediate", v
            yield from sharded_counts(value, where)


def blockers(config: dict, size: int) -> list[str]:
    """What keeps `config` from being split over `size` ranks (empty: it can be)."""
    found = []
    for where, kind, value in sharded_counts(config):
        splits = value % size == 0 or (kind == "kv_heads" and size % value == 0)
        if not splits:
            found.append(f"{where} = {value} does not divide by {size}")
    return list(dict.fromkeys(found))


@dataclass
class TensorParallelPlan:
    """A family-config's TP-ready checkpoint: whether it builds, and what keeps each size out."""

    name: str
    """The family-config id (`family-kind`)."""
    built: bool
    reason: str = ""
    """Why the TP-ready checkpoint does not build (empty when it does)."""
    blocked: dict[int, list[str]] = field(default_factory=dict)
    """Per TP size, the counts that do not divide (empty list: the size is allowed)."""
    saved_config: dict = field(default_factory=dict, repr=False)
    """The TP-ready checkpoint's config.json."""

    @property
    def sizes(self) -> list[int]:
        return [size for size, why in self.blocked.items() if not why] if self.built else []

    def why_not(self, size: int) -> str | None:
        """None when `size` is allowed, else the reason, for a skip."""
        if not self.built:
            return f"{self.name}: no TP-ready synthetic checkpoint: {self.reason}"
        why = self.blocked.get(size) if size in self.blocked else blockers(self.saved_config, size)
        return f"{self.name}: cannot be split over {size} GPUs: {'; '.join(why)}" if why else None


def plan(spec: FamilySpec, variant: Variant, heads: int = TP_READY_HEADS) -> TensorParallelPlan:
    """Build (or reuse) the TP-ready checkpoint's config, without weights, and check every size."""
    name = config_id(spec, variant)
    try:
        folder = checkpoint_dir(spec, variant, weights=False, heads=heads)
    except NotBuildable as err:
        return TensorParallelPlan(name, False, str(err))
    except Exception as err:  # the builder with scaled sizes: a config class that refuses them
        return TensorParallelPlan(name, False, f"{type(err).__name__}: {str(err)[:300]}")
    saved = json.loads((folder / "config.json").read_text())
    return TensorParallelPlan(name, True, blocked={size: blockers(saved, size) for size in TP_SIZES}, saved_config=saved)


def plan_lines() -> list[str]:
    """Per family-config with a synthetic recipe: the TP sizes its TP-ready checkpoint splits into, or why not."""
    from vlcheck.spec.registry import all_families

    lines = []
    for spec in all_families().values():
        if spec.synthetic is None:
            continue
        for variant in spec.variants:
            p = plan(spec, variant)
            if not p.built:
                lines.append(f"{p.name}: not built: {p.reason[:150]}")
                continue
            lines.append(f"{p.name}: " + ", ".join(f"TP={s}" if not why else f"not TP={s} ({why[0]})"
                                                   for s, why in p.blocked.items()))
    return lines
