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


CPU_KERNEL_CLASSES = ("avx512_bf16", "avx512", "avx2", "x86_64", "aarch64", "ppc64le", "s390x", "riscv64")
"""What `cpu_kernels` answers: x86's three classes vLLM ships a library for, an x86 machine without AVX2,
and other architectures (one library each)."""


def cpu_kernels() -> str:
    """The instruction-set class whose kernels vLLM's CPU build runs on this machine, by the probes its
    `CpuPlatform.import_kernels` makes (vLLM 0.24.0): `avx512_bf16` (it loads `vllm._C`), `avx512`
    (`vllm._C_AVX512`), `avx2` (`vllm._C_AVX2`), else the architecture (`aarch64`, ...). The classes
    ship different kernels (no MoE prepacking nor `cpu_gemm_wna16` in the AVX2 one) and oneDNN picks its
    own by the same instructions: quant_w8a8 on qwen2_vl moved 0.55 nats between an AVX-512 and an
    AVX2 machine, same versions. A CPU golden is recorded per class (`engine/goldens.py`)."""
    import platform

    arch = platform.machine().lower()
    if arch not in ("x86_64", "amd64"):
        return arch or "unknown"
    try:
        import torch

        if torch.cpu._is_avx512_supported():
            return "avx512_bf16" if torch.cpu._is_avx512_bf16_supported() else "avx512"
        return "avx2" if torch.cpu._is_avx2_supported() else "x86_64"
    except Exception:  # noqa: BLE001 - an older torch without the probes: the class is unknown
        return "x86_64"


def device_name() -> str:
    """What an engine ran on, as goldens and their noise record it: the GPU's name, or `cpu <class>`."""
    return gpu_name() or f"cpu {cpu_kernels()}"


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
