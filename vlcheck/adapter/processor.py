"""vLLM's multimodal processor for a local checkpoint, built and run on CPU (no engine, no GPU).

The processor cache moved between vLLM generations (both found by signature):

- vllm 0.24: `MULTIMODAL_REGISTRY.create_processor(config, cache=...)` binds the cache to the
  processor. With a cache, vLLM runs the HF processor on the text and on the media separately and
  applies the placeholder updates itself; without one, the HF processor sees both at once.
- vllm 0.32: `create_processor(config)` takes no cache; the processor's `__call__(..., cache=...)`
  takes it per request. The prompt is always tokenized alone and vLLM always applies the
  placeholders (the HF processor sees only the media), with or without the cache. A string
  prompt is tokenized with the engine's limits (`truncation=True, max_length=max_model_len + 1`,
  from the left): a prompt over the limit loses its start, and with it leading placeholders.

`cached=True` therefore means the same on both (what an engine serves by default); `cached=False`
is the old joint HF call on 0.24 and the same path, minus the cache, on 0.32: a difference between
the two paths that disappears on 0.32 is vLLM's change, not the suite's.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from vlcheck.adapter.generations import record, unknown

CACHE_AT_CREATION = "create_processor(config, cache=...): HF processor on text+media when uncached (vllm 0.24)"
CACHE_PER_CALL = "create_processor(config); processor(..., cache=...): HF processor on media only (vllm 0.32)"

# Engine args that shape the model config, and so the multimodal processor.
MODEL_CONFIG_ARGS = ("dtype", "max_model_len", "limit_mm_per_prompt", "mm_processor_kwargs", "hf_overrides",
                     "trust_remote_code", "tokenizer_mode", "revision", "mm_processor_cache_gb")


def generation_of(create_processor: Callable, processor_call: Callable) -> str:
    """Where these two functions take the processor cache (raises SuiteError where neither does)."""
    if "cache" in inspect.signature(create_processor).parameters:
        return CACHE_AT_CREATION
    if "cache" in inspect.signature(processor_call).parameters:
        return CACHE_PER_CALL
    raise unknown("processor", "a `cache` parameter of MultiModalRegistry.create_processor or of the processor's __call__")


@lru_cache(maxsize=None)
def generation() -> str:
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.processing import BaseMultiModalProcessor

    return record("processor", generation_of(MULTIMODAL_REGISTRY.create_processor, BaseMultiModalProcessor.__call__))


def hf_processor_sees_text_when_uncached() -> bool:
    """Whether the cache-off path hands the HF processor the prompt text with the media (vllm 0.24)."""
    return generation() == CACHE_AT_CREATION


@dataclass
class Processor:
    """vLLM's processor for one checkpoint, with the engine's default processor cache or without."""

    vllm_processor: Any
    cache: Any | None
    cache_per_call: bool

    @property
    def info(self) -> Any:
        return self.vllm_processor.info

    def clear_cache(self) -> None:
        """Forget every cached item (each hostile case starts from an empty cache)."""
        if self.cache is not None:
            self.cache.clear_cache()

    def cache_hits(self) -> int | None:
        """Items the processor cache has served so far (its own counter, `make_stats`: vllm 0.24 and
        0.32); None without a cache or a counter."""
        stats = getattr(self.cache, "make_stats", None)
        return None if stats is None else int(stats().hits)


def create_processor(local_dir: str, engine_args: dict, cached: bool = False) -> Processor:
    """vLLM's multimodal processor for a local checkpoint. `cached`: with the processor cache an
    engine has by default (mm_processor_cache_gb > 0); see the module docstring for what the two
    paths do on each vLLM generation."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.cache import MultiModalProcessorOnlyCache

    from vlcheck.adapter.models import inspect_in_this_process

    inspect_in_this_process()
    kwargs = {k: v for k, v in engine_args.items() if k in MODEL_CONFIG_ARGS}
    kwargs.setdefault("dtype", "bfloat16")
    try:
        config = ModelConfig(model=local_dir, tokenizer=local_dir, **kwargs)
    except Exception as err:
        why = _why_not_inspected(str(err))
        if why is None:
            raise
        arch, cause = why
        # a RuntimeError, not the import's own exception: an ImportError here (transformers 5.17.0
        # removed a name vLLM 0.24 imports) is a failure, where the checks read an ImportError from
        # create_processor as a missing optional package. Its traceback is the import's, so the cell
        # says where it was raised (not pydantic's frames) and whose code raised it.
        raise NotInspected(f"vLLM could not inspect {arch}: importing its class raised {type(cause).__name__}: "
                           f"{cause}").with_traceback(cause.__traceback__) from None
    cache = MultiModalProcessorOnlyCache(config) if cached else None
    if generation() == CACHE_AT_CREATION:
        return Processor(MULTIMODAL_REGISTRY.create_processor(config, cache=cache), cache, cache_per_call=False)
    return Processor(MULTIMODAL_REGISTRY.create_processor(config), cache, cache_per_call=True)


_UNINSPECTED = re.compile(r"Model architectures (\[.*?\]) failed to be inspected")
"""vLLM's message (0.24-0.33) where its model-info inspection of an architecture failed."""


class NotInspected(RuntimeError):
    """vLLM's ModelConfig refused an architecture it "failed to be inspected", and importing the
    model class says why."""


def _why_not_inspected(message: str) -> tuple[str, BaseException] | None:
    """(architecture, what importing its model class raises), where vLLM's ModelConfig said only
    that the architectures it names "failed to be inspected" (its reason goes to the log). On CI's
    candidate, five families' cells read that alone, and the cause was a file installed by two
    distributions: `cuda.bindings.runtime` without `cudaLibrary_t`. None where every class imports."""
    from vlcheck.adapter import models

    named = _UNINSPECTED.search(message)
    try:
        archs = ast.literal_eval(named.group(1)) if named else []
    except (ValueError, SyntaxError):
        return None
    for arch in archs:
        if arch in models.supported_architectures() and (cause := models.class_import_error(arch)) is not None:
            return arch, cause
    return None


def apply_processor(processor: Processor, prompt: str, mm_data: dict) -> dict:
    """Run the processor on one prompt with its media: token ids and placeholder ranges."""
    proc = processor.vllm_processor
    extra = {"cache": processor.cache} if processor.cache_per_call else {}
    out = proc(prompt, mm_items=proc.info.parse_mm_data(mm_data), hf_processor_mm_kwargs={}, **extra)
    return {
        "prompt_token_ids": list(out["prompt_token_ids"]),
        "placeholders": {m: [(p.offset, p.length) for p in ranges] for m, ranges in out["mm_placeholders"].items()},
    }


def profile_media(local_dir: str, engine_args: dict) -> dict[str, Any]:
    """Per modality the engine takes, the one item its startup profile processes (the largest the
    model takes): `dummy_inputs.get_dummy_mm_data`, the same on vllm 0.24 and 0.32."""
    proc = create_processor(local_dir, {"dtype": "auto", **engine_args}).vllm_processor
    config = proc.info.ctx.model_config
    limits = config.get_multimodal_config().limit_per_prompt
    out = {}
    for modality in proc.info.get_supported_mm_limits():
        limit = limits.get(modality)
        if limit is not None and (getattr(limit, "count", limit) or 0) > 0:
            media = proc.dummy_inputs.get_dummy_mm_data(config.max_model_len, {modality: 1}, limits)[modality]
            out[modality] = media[0] if isinstance(media, list) else media
    return out


def processed_bytes(local_dir: str, engine_args: dict, modality: str, item: Any) -> int:
    """Bytes of one processed item as vLLM's processor cache counts them (`MultiModalCache.get_item_size`,
    else the tensors' bytes), in the dtype the engine resolves (`auto` unless the args say)."""
    proc = create_processor(local_dir, {"dtype": "auto", **engine_args}).vllm_processor
    text = proc.dummy_inputs.get_dummy_text({modality: 1})
    out = proc(text, mm_items=proc.info.parse_mm_data({modality: [item]}), hf_processor_mm_kwargs={})
    processed = out["mm_kwargs"][modality][0]
    try:
        from vllm.multimodal.cache import MultiModalCache  # vllm 0.24
    except ImportError:
        try:
            from vllm.multimodal.cache.base import MultiModalCache  # vllm 0.32: a package
        except ImportError:
            return _tensor_bytes(processed)
    return MultiModalCache.get_item_size(processed)


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.nbytes
    if isinstance(value, dict) or hasattr(value, "values") and callable(value.values):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return _tensor_bytes(value.data) if hasattr(value, "data") else 0
