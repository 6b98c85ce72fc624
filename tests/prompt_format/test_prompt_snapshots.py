"""Every family's prompts, locked down in `snapshots/test_prompt_snapshots/<family>.txt`."""

from vlcheck.snapshots import SNAPSHOT_ROOT, prompt_document
from vlcheck.registry import all_families


def test_prompts_match_snapshot(family, family_snapshot):
    assert family_snapshot == prompt_document(family)


def test_no_snapshot_without_a_family():
    """A removed or renamed family must take its snapshot with it (syrupy cannot see these)."""
    stored = {p.stem for p in (SNAPSHOT_ROOT / "test_prompt_snapshots").glob("*.txt")}
    assert sorted(stored - set(all_families())) == []
