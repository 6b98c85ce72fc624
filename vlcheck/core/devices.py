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
