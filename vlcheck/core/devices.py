"""The one answer to "which GPU is this?": every record of a run (a report's environment, a stored
cell's engine identity, a golden's recording machine) asks here, so "no GPU" has one spelling."""

from __future__ import annotations


def gpu_name() -> str | None:
    """The first visible GPU's name as torch reports it (`NVIDIA H100 80GB HBM3`), or None where
    torch sees no GPU or cannot be imported."""
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken CUDA runtime is a machine without a usable GPU
        return None


def cpu_model() -> str:
    import platform
    from pathlib import Path

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What a timing was measured on: timings of two machines are reported, never compared."""
    import os

    return {"cpu": cpu_model(), "cores": os.cpu_count() or 0, "gpu": gpu_name()}


def same_machine(a: dict | None, b: dict | None) -> bool:
    return bool(a) and bool(b) and all(a.get(k) == b.get(k) for k in ("cpu", "cores", "gpu"))
