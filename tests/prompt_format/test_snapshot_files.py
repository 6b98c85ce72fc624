"""Every stored snapshot and golden (`snapshots/gpu_goldens/`) belongs to a family-config that exists. Snapshot files are
never deleted by syrupy (see FamilySnapshot.delete_snapshots), so this is where a file left
behind by a removed or renamed family shows up."""

from vlcheck.registry import all_families
from vlcheck.snapshots import SNAPSHOT_ROOT


def known_ids() -> set[str]:
    ids = set()
    for name, spec in all_families().items():
        ids.add(name)
        ids.update(f"{name}-{variant.kind}" for variant in spec.variants)
    return ids


def test_every_snapshot_file_belongs_to_a_family_config():
    ids = known_ids()
    files = [p for p in SNAPSHOT_ROOT.rglob("*") if p.is_file() and p.suffix in (".txt", ".json")]
    orphans = [str(p.relative_to(SNAPSHOT_ROOT)) for p in files if p.stem not in ids]
    assert files, f"no snapshot files under {SNAPSHOT_ROOT}"
    assert not orphans, f"snapshot files of no family-config (delete them): {orphans}"
