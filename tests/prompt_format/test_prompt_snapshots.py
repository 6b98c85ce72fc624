"""Every family's prompts, locked down in `snapshots/test_prompt_snapshots/<family>.txt`."""

from vlcheck.prompt.snapshots import prompt_document


def test_prompts_match_snapshot(family, family_snapshot):
    assert family_snapshot == prompt_document(family), (
        f"{family.name} spec: the rendered example prompts differ from the snapshot (diff below)")

