"""Fixtures: a package of our own, installed as a wheel installs it or planted on the path, for the
tests of code identity (`core.installed_code`) and of the result store that keys on it."""

from __future__ import annotations

import csv
import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vlcheck.core import installed_code
from vlcheck.core.installed_code import record_hash

FILES = {"fakepkg/__init__.py": "from .mod import answer\n", "fakepkg/mod.py": "def answer():\n    return 42\n",
         "fakepkg/data/table.txt": "a b c\n"}


def _write_package(root: Path, files: dict[str, str] = FILES) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _write_dist_info(site: Path, listed: dict[str, str], direct_url: dict | None = None) -> None:
    """A wheel's dist-info: METADATA and, written last as installers do, RECORD."""
    info = site / "fakepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    with open(info / "RECORD", "w", newline="") as out:
        writer = csv.writer(out)
        for name in listed:
            data = (site / name).read_bytes()
            writer.writerow([name, record_hash(data), len(data)])
        writer.writerow(["fakepkg-1.0.dist-info/RECORD", "", ""])


@pytest.fixture
def on_path(monkeypatch):
    """Put folders first on sys.path, as PYTHONPATH would, with fakepkg known to installed_code."""
    monkeypatch.setitem(installed_code.PACKAGES, "fakepkg", ("fakepkg",))
    monkeypatch.delitem(sys.modules, "fakepkg", raising=False)

    def put(*folders: Path) -> None:
        for folder in reversed(folders):
            monkeypatch.syspath_prepend(str(folder))
        importlib.invalidate_caches()
    return put


@pytest.fixture
def site(tmp_path, on_path):
    """A site-packages with fakepkg installed as a wheel."""
    site = tmp_path / "site-packages"
    _write_package(site)
    _write_dist_info(site, FILES)
    on_path(site)
    return site


@pytest.fixture
def fake_package():
    """What the fixtures above write, for a test that plants or edits a copy."""
    return SimpleNamespace(files=FILES, write_package=_write_package, write_dist_info=_write_dist_info)
