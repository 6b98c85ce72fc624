"""The package builds as a wheel that works away from the checkout: installed into a fresh
virtual environment, `vlcheck list` finds every family in the installed package data.

The fresh environment takes vlcheck's dependencies (vLLM, transformers, ...) from the running
one: `venv --system-site-packages` would give the base interpreter's site-packages, not this
virtual environment's, so a .pth file adds the running one's behind the new one's own (a plain
path line: the editable install's finder hook in there is not run, so `vlcheck` is the wheel's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from vlcheck.spec.registry import BUILTIN_SPEC_DIR, all_families

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)


def _build_backend_installed() -> str | None:
    """Why the running interpreter cannot build the wheel without an index (None if it can)."""
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]:
        req = Requirement(line)
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return f"{req.name} is not installed"
        if not req.specifier.contains(have, prereleases=True):
            return f"{req.name} {have} is installed, the build needs {req}"
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the sources (a build in place would leave build/ and
    *.egg-info in the checkout): without build isolation where the installed setuptools is new
    enough, else with it, which needs the package index."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "vlcheck", src / "vlcheck", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    missing = _build_backend_installed()
    isolation = [] if missing else ["--no-build-isolation"]
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--timeout", "15", "--retries", "0",
                  "-w", str(out), str(src)])
    wheels = list(out.glob("vlcheck-*.whl"))
    if built.returncode != 0 or len(wheels) != 1:
        last = (built.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"the wheel cannot be built offline ({missing}) and pip could not fetch the build backend: {last}")
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with only the wheel installed; returns its bin/ folder."""
    venv = tmp_path_factory.mktemp("venv")
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    own = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    Path(own, "running-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)])
    assert done.returncode == 0, done.stdout + done.stderr
    return venv / "bin"


def _outside_checkout(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {"cwd": tmp_path, "env": env}


def test_the_wheel_holds_the_specs_and_the_durations(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    specs = {Path(n).name for n in names if re.fullmatch(r"vlcheck/specs/[^/]+\.toml", n)}
    assert specs == {p.name for p in BUILTIN_SPEC_DIR.glob("*.toml")}
    assert "vlcheck/gate/gpu_durations.json" in names
    assert "vlcheck/__init__.py" in names


def test_vlcheck_list_runs_from_the_installed_package(installed, tmp_path):
    where = _run([str(installed / "python"), "-c", "import vlcheck, vlcheck.spec.registry as r; "
                  "print(vlcheck.__file__); print(r.BUILTIN_SPEC_DIR); print(vlcheck.__version__)"],
                 **_outside_checkout(tmp_path))
    assert where.returncode == 0, where.stderr
    package, spec_dir, version = where.stdout.split()
    venv = str(installed.parent)
    assert package.startswith(venv) and spec_dir.startswith(venv), where.stdout
    assert version == declared_version()

    listed = _run([str(installed / "vlcheck"), "list", "--json"], **_outside_checkout(tmp_path))
    assert listed.returncode == 0, listed.stderr
    families = json.loads(listed.stdout)
    assert sorted(f["name"] for f in families) == sorted(all_families())  # the 63 of the checkout
    assert len(families) == len(list(BUILTIN_SPEC_DIR.glob("*.toml")))
    assert all(f["spec"].startswith(venv) for f in families), [f["spec"] for f in families][:3]
    table = _run([str(installed / "vlcheck"), "list"], **_outside_checkout(tmp_path))
    assert table.returncode == 0 and f"\n{len(families)} families: " in table.stdout, table.stdout[-300:] + table.stderr


def declared_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
