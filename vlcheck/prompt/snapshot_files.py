"""syrupy's storage of the snapshots: one plain-text file per family and check (a module of its
own: syrupy is a test-only dependency, and `vlcheck check` reads the documents in `snapshots`)."""

from __future__ import annotations

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from vlcheck.prompt.snapshots import SNAPSHOT_ROOT


class FamilySnapshot(SingleFileSnapshotExtension):
    """One text file per parametrized test case: `vlcheck/snapshots/<test file>/<param id>.txt`."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOT_ROOT / test_location.basename)

    @classmethod
    def get_snapshot_name(cls, *, test_location, index=0) -> str:
        node = test_location.nodename
        return node.split("[", 1)[1][:-1] if "[" in node else test_location.testname

    def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
        """Never: syrupy cannot tell a family left out by --vlcheck-family from a removed one (it
        deleted every other family's file on a filtered --snapshot-update). Files of removed
        families are caught by tests/prompt_format/test_snapshot_files.py instead."""
