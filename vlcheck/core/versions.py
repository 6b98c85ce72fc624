"""The installed versions of the packages vlcheck gates (from package metadata: no import)."""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata

GATED = ("vllm", "transformers", "torch")


@lru_cache(maxsize=None)
def installed() -> dict[str, str | None]:
    """`{"vllm": "0.24.0", "transformers": "5.16.1", "torch": ...}`; None for a missing package."""
    found: dict[str, str | None] = {}
    for dist in GATED:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def describe() -> str:
    return ", ".join(f"{dist} {version}" for dist, version in installed().items())
