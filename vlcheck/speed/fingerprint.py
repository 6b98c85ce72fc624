"""The machine a timing was measured on: timings from two machines are reported, never compared."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[str]:
    """GPU names where torch sees CUDA devices (an empty list on CPU machines)."""
    try:
        import torch

        if torch.cuda.is_available():
            return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no usable torch: no GPU to name
        pass
    return []


def fingerprint() -> dict:
    return {"cpu": cpu_model(), "cores": os.cpu_count() or 0, "gpus": gpus(), "system": platform.system()}


def same_machine(a: dict | None, b: dict | None) -> bool:
    """Same CPU model, core count and GPUs: the condition under which two timings may be compared."""
    return bool(a) and bool(b) and all(a.get(k) == b.get(k) for k in ("cpu", "cores", "gpus"))
