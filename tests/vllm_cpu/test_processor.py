"""vLLM's multimodal processor on each family's synthetic checkpoint: one placeholder range per
item, for 1..limit items; the per-item token counts are snapshotted."""

import json
from pathlib import Path

from vlcheck.core.results import Status
from vlcheck.cpu.processor_check import processor_check
from vlcheck.runners.testing import require_ok, run_check
from vlcheck.spec.registry import load_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "specs"


def test_processor_expands_every_item(family, variant, family_snapshot, request):
    result = run_check(request, "processor", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    require_ok(result, variant)
    counts = result.data.get(f"{variant.kind}.token_counts", {})  # none where every shape failed (declared)
    lines = [f"# vLLM processor on the synthetic checkpoint: {family.name} [{variant.kind}]",
             f"# status: {result.status.value}"]
    lines += [f"{shape}: {json.dumps(c)}" for shape, c in counts.items()]
    assert family_snapshot == "\n".join(lines) + "\n", (
        f"{family.name} [{variant.kind}] processor: token counts differ from the snapshot (diff below)")


def test_removed_placeholder_fails_naming_family_and_item():
    spec = load_spec(FIXTURES / "qwen2_vl_no_placeholder.toml")
    result = processor_check(spec, spec.single)
    assert result.status is Status.FAIL
    assert result.reason.startswith("[single] qwen2_vl_no_placeholder: image item 0: the prompt has 0 placeholder(s) "
                                    "for 1 image item(s)"), result.reason
