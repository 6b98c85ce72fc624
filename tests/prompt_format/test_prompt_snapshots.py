"""Every family's prompts, locked down in `vlcheck/snapshots/test_prompt_snapshots/<family>.txt` (with
--vlcheck-baseline: the baseline's `spec` cell, fact `prompts`)."""

from vlcheck.runners.testing import baseline_of
from vlcheck.prompt.snapshots import prompt_document


def test_prompts_match_snapshot(family, family_snapshot, request):
    baseline = baseline_of(request.config)
    if baseline is not None:
        baseline.compare_fact(family.name, "spec", "prompts", prompt_document(family).splitlines())
        return
    assert family_snapshot == prompt_document(family), (
        f"{family.name} spec: the rendered example prompts differ from the snapshot (diff below)")
