"""A package's code by content (issue 49): the same files give the same digest wherever they lie
and however they were installed; one changed line, a planted copy first on the path, an editable
source tree or a removed file give another, named; a file touched without a change keeps it."""

from __future__ import annotations

import os
import shutil

import pytest

from vlcheck.core import installed_code
from vlcheck.core.installed_code import measure

def test_an_unchanged_wheel_install_is_digested_from_its_record_without_reading_a_file(site, monkeypatch):
    monkeypatch.setattr(installed_code, "record_hash", lambda data: pytest.fail("a file was read"))
    found = measure("fakepkg")
    assert (found.install, found.version, found.changed_count) == ("wheel", "1.0", 0)
    assert found.location == str((site / "fakepkg").resolve())


def test_the_same_files_elsewhere_are_the_same_code(site, tmp_path, on_path):
    installed = measure("fakepkg")
    planted = tmp_path / "planted"
    shutil.copytree(site / "fakepkg", planted / "fakepkg")
    on_path(planted)
    copy = measure("fakepkg")
    assert copy.location == str((planted / "fakepkg").resolve()) and copy.install == "not its distribution's"
    assert copy.digest == installed.digest


def test_a_planted_copy_first_on_the_path_with_one_changed_line_is_other_code(site, tmp_path, on_path, fake_package):
    installed = measure("fakepkg")
    planted = tmp_path / "planted"
    shutil.copytree(site / "fakepkg", planted / "fakepkg")
    (planted / "fakepkg" / "mod.py").write_text(fake_package.files["fakepkg/mod.py"].replace("42", "43"))
    on_path(planted)
    found = measure("fakepkg")
    assert found.version == installed.version and found.digest != installed.digest
    assert found.install == "not its distribution's"


def test_one_changed_line_in_the_install_is_other_code_and_named(site, fake_package):
    before = measure("fakepkg")
    (site / "fakepkg" / "mod.py").write_text(fake_package.files["fakepkg/mod.py"].replace("42", "43"))
    after = measure("fakepkg")
    assert after.digest != before.digest
    assert (after.changed, after.install) == (("fakepkg/mod.py",), "wheel")
    assert "1 file(s) differ from the distribution's RECORD: fakepkg/mod.py" in after.line()


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(site, fake_package):
    """Tools that restore mtimes (cp -p, rsync -t, a patch tool) cannot set ctime back."""
    before = measure("fakepkg")
    target = site / "fakepkg" / "mod.py"
    st = target.stat()
    target.write_text(fake_package.files["fakepkg/mod.py"].replace("42", "24"))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    assert measure("fakepkg").digest != before.digest


def test_a_file_touched_without_a_change_keeps_its_digest(site):
    before = measure("fakepkg")
    os.utime(site / "fakepkg" / "mod.py")
    after = measure("fakepkg")
    assert (after.digest, after.changed_count) == (before.digest, 0)


def test_an_added_and_a_removed_file_are_other_code_and_named(site):
    before = measure("fakepkg")
    (site / "fakepkg" / "data" / "table.txt").unlink()
    (site / "fakepkg" / "extra.py").write_text("x = 1\n")
    after = measure("fakepkg")
    assert after.digest != before.digest
    assert set(after.changed) == {"fakepkg/extra.py", "fakepkg/data/table.txt (removed)"}


def test_bytecode_caches_are_not_code(site):
    before = measure("fakepkg")
    (site / "fakepkg" / "__pycache__").mkdir()
    (site / "fakepkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0" * 16)
    assert measure("fakepkg").digest == before.digest


def test_an_editable_install_is_its_source_tree(tmp_path, on_path, fake_package):
    site, source = tmp_path / "site-packages", tmp_path / "checkout"
    site.mkdir()
    fake_package.write_package(source)
    (site / "__editable__.fakepkg-1.0.pth").write_text(str(source) + "\n")
    fake_package.write_dist_info(site, {"__editable__.fakepkg-1.0.pth": ""},
                     direct_url={"url": source.resolve().as_uri(), "dir_info": {"editable": True}})
    on_path(site, source)  # what the .pth does at startup
    found = measure("fakepkg")
    assert (found.install, found.location, found.changed_count) == ("editable", str((source / "fakepkg").resolve()), 0)
    (source / "fakepkg" / "mod.py").write_text(fake_package.files["fakepkg/mod.py"].replace("42", "43"))
    assert measure("fakepkg").digest != found.digest


def test_an_absent_package_is_said_so(on_path, monkeypatch):
    monkeypatch.setitem(installed_code.PACKAGES, "no_such_package_here", ("no-such-package-here",))
    found = measure("no_such_package_here")
    assert (found.install, found.digest, found.location) == ("absent", "absent", None)


def _env(**code) -> dict:
    return {"code": {p: {"package": p, "distribution": p, "version": "1.0", "location": f"/site/{p}", "install": "wheel",
                         "digest": digest} for p, digest in code.items()}}


def test_the_diff_says_same_version_other_code_and_names_the_same_code():
    from vlcheck.gate.ran_on import code_lines

    lines = code_lines(_env(vllm="a", transformers="b", torch="c"), _env(vllm="A", transformers="b", torch="c"))
    assert lines[0].startswith("vllm 1.0: the same version, other code")
    assert lines[1] == "the same code on both ends: transformers, torch"
    old_report = code_lines({}, _env(vllm="a"))
    assert old_report == ["the baseline report records no code digests (an older vlcheck): the same version there "
                          "may be other code"]


def test_a_run_that_saw_its_code_change_is_inconclusive():
    from vlcheck.gate.diff import compare

    report = {"schema": 3, "checks": [], "families": {}, "environment": {}}
    changed = {**report, "environment": {"code_changed_during_run": ["vllm"]}}
    d = compare(report, changed)
    assert d.verdict == "INCONCLUSIVE" and "vllm change on disk while it measured" in d.not_run[0]
