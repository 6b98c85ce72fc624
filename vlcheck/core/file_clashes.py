"""Files that two installed distributions both install, with different contents.

The installer writes one over the other, so which copy is on disk depends on the order it
installed them in, and uv installs in parallel. vLLM 0.33.0's dependencies do this: cuda-python
12.6.2.post1 (through flashinfer-python) and cuda-bindings 13.5.0 (through nvidia-cutlass-dsl) both
install `cuda/bindings/runtime.cpython-311-x86_64-linux-gnu.so`. Two environments resolved to the same
versions from `.ci/candidate.txt` differed: where cuda-python's copy won, vLLM's quantization
imports (flashinfer, then cutlass) failed with "module 'cuda.bindings.runtime' has no attribute
'cudaLibrary_t'", and a CI diff counted 49 regressions where the other environment counted 26.
A report that names the clash explains such a difference; nothing else in it would.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections import defaultdict
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Iterable


@dataclass(frozen=True)
class FileClash:
    """Distributions that install some of the same files with different contents."""

    claimants: tuple[str, ...]
    """Each as `name version`, sorted."""
    count: int
    paths: tuple[str, ...]
    """The first few of the `count` paths."""
    present: tuple[str | None, ...]
    """Per path shown, the claimant whose copy is on disk (None: no claimant's copy)."""

    def line(self) -> str:
        winners = sorted({p or "none of them" for p in self.present})
        shown = ", ".join(self.paths) + (f" and {self.count - len(self.paths)} more" if self.count > len(self.paths) else "")
        return (f"{' and '.join(self.claimants)} install {self.count} of the same file(s) with different "
                f"contents ({shown}); on disk: {', '.join(winners)}'s (the install order decides)")


def _record_hash(path: Path) -> str | None:
    try:
        digest = hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def file_clashes(distributions: Iterable[metadata.Distribution] | None = None) -> list[FileClash]:
    """The clashes among the installed distributions (or `distributions`), one per set of claimants."""
    claims: dict[str, dict[str, tuple[str, metadata.PackagePath, metadata.Distribution]]] = defaultdict(dict)
    for dist in metadata.distributions() if distributions is None else distributions:
        name = f"{dist.metadata['Name']} {dist.version}"
        for file in dist.files or ():
            if file.hash is not None:  # RECORD lists its own entry and bytecode without one
                claims[str(file)][name] = (f"{file.hash.mode}={file.hash.value}", file, dist)
    grouped: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path, by_dist in claims.items():
        if len(by_dist) > 1 and len({h for h, _, _ in by_dist.values()}) > 1:
            grouped[tuple(sorted(by_dist))].append(path)
    clashes = []
    for claimants, paths in sorted(grouped.items()):
        paths = sorted(paths)[:SHOWN]  # hashing every clashing file took seconds (cutlass's static libraries)
        clashes.append(FileClash(claimants, len(grouped[claimants]), tuple(paths),
                                 tuple(_present(claims[p]) for p in paths)))
    return clashes


SHOWN = 3


@functools.cache
def installed_file_clashes() -> tuple[FileClash, ...]:
    """The clashes of this process's environment, read once: reading every distribution's RECORD
    (70,000 files with vLLM's CUDA dependencies) took 1.4 s, and a report is built many times in a
    test process; the installed distributions do not change while a process runs."""
    return tuple(file_clashes())


def _present(by_dist: dict) -> str | None:
    _, file, dist = next(iter(by_dist.values()))
    on_disk = _record_hash(Path(dist.locate_file(file)))
    return next((name for name, (h, _, _) in by_dist.items() if h == on_disk), None)
