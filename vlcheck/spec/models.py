"""Where a spec's model lives (a Hub id or a local folder), and what its config.json says.

A user's spec names its model as vLLM takes it: a Hub id (`org/name`) or a folder. A folder is
written as a path (`/models/my-qwen-ft`, `./ckpt`, `../ckpt`, `~/ckpt`); a relative one is read
relative to the spec file, so a spec folder can travel with its models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PATH_PREFIXES = ("/", "./", "../", "~")


def is_path(model: str) -> bool:
    """Whether the spec writes `model` as a folder rather than a Hub id."""
    return model.startswith(PATH_PREFIXES)


def resolve_model(model: str, spec_path: Path) -> str:
    """A folder written in a spec, as an absolute path (relative to the spec file); a Hub id as is."""
    if not is_path(model):
        return model
    return str((spec_path.parent / Path(model).expanduser()).resolve())


def local_dir(model: str) -> Path | None:
    """The model's folder when `model` names one that exists (vLLM then reads it, not the Hub)."""
    path = Path(model)
    return path if path.is_absolute() and path.is_dir() else None


def model_config(model: str, revision: str | None = None) -> dict[str, Any] | None:
    """The model's config.json: from its folder, or from the HF cache (never the network: a spec
    loads offline); None when neither has it."""
    folder = local_dir(model)
    if folder is not None:
        path = folder / "config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        try:
            found = try_to_load_from_cache(model, "config.json", revision=revision)
        except Exception:  # a malformed repo id: the Hub checks say so later
            return None
        path = Path(found) if isinstance(found, str) else None
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def architecture_of(config: dict[str, Any] | None) -> str | None:
    archs = (config or {}).get("architectures") or []
    return archs[0] if archs and isinstance(archs[0], str) else None
