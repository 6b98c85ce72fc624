"""Folders derived from a seeded checkpoint (LoRA adapters, quantized checkpoints): keyed on what
they are made of, built once, in a staging folder renamed into place (parallel workers racing to
build the same folder end with one, the same)."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def package_code(*packages: str) -> dict[str, str]:
    """Import name -> the digest of the code installed under it (`core.installed_code`), `absent` where
    it is not installed: what a built folder is keyed on. A version string names a release, not the
    code that builds: a patched transformers, an editable checkout or vLLM's CPU build under the same
    number would otherwise be served another build's folder."""
    from vlcheck.core import installed_code

    return {package: installed_code.identity(package).digest for package in packages}


def built_once(checkpoint: Path, kind: str, content: dict, marker: str, build: Callable[[Path], None]) -> Path:
    """`<checkpoint>-<kind>-<digest of content>` beside the checkpoint, made by `build(staging)` on
    first use; a folder holding `marker` is complete."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    target = Path(checkpoint).parent / f"{Path(checkpoint).name}-{kind}-{digest}"
    if (target / marker).exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(staging)
        try:
            staging.rename(target)  # another worker may have won the race: its folder is the same
        except OSError:
            if not (target / marker).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
