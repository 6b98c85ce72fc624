"""Every stored snapshot and golden belongs to a family, or family-config, that exists. Syrupy
never deletes snapshot files here (see FamilySnapshot.delete_snapshots), so this is where a file
left behind by a removed or renamed family shows up."""

from vlcheck.prompt.snapshots import SNAPSHOT_ROOT
from vlcheck.spec.registry import all_families, spec_errors
from vlcheck.spec.schema import config_id

PER_FAMILY = {"test_prompt_snapshots"}
"""Folders with one file per family; every other folder has one per family-config."""


def test_every_snapshot_file_belongs_to_a_family_or_family_config():
    families = all_families()
    configs = {config_id(spec, variant) for spec in families.values() for variant in spec.variants}
    files = [p for p in SNAPSHOT_ROOT.rglob("*") if p.is_file() and p.suffix in (".txt", ".json")]
    broken = spec_errors()  # their tests fail with the loader's message; their files are not orphans
    orphans = [str(p.relative_to(SNAPSHOT_ROOT)) for p in files
               if p.stem not in (families if p.relative_to(SNAPSHOT_ROOT).parts[0] in PER_FAMILY else configs)
               and p.stem.split("-")[0] not in broken and p.stem not in broken]
    assert len(files) > len(families), f"too few snapshot files under {SNAPSHOT_ROOT}: {len(files)}"
    assert not orphans, f"snapshot files of no family or family-config (delete them): {orphans}"
