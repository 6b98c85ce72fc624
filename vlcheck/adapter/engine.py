"""vLLM's engine beyond `LLM` itself: its argument fields, LoRA requests, and tearing it down so
that the same process can start another."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from importlib.metadata import version as dist_version

from vlcheck.adapter.generations import record, single_generation


@lru_cache(maxsize=None)
def version() -> str:
    return dist_version("vllm")


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
