"""Every use of vLLM's internal APIs, in one place.

These APIs move between releases. Each function here states what it needs; `SUPPORTED` names the
versions this module was written against, and `check_version()` tells a user running another one
that a failure may be this module's, not their model's.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

SUPPORTED = ("0.24",)


@lru_cache(maxsize=None)
def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("vllm")


def check_version() -> str | None:
    """A warning when the installed vLLM is not one this module was written against."""
    v = version()
    if not any(v == s or v.startswith(s + ".") for s in SUPPORTED):
        return f"vlcheck's vLLM adapter was written for vllm {', '.join(SUPPORTED)}; this is {v}"
    return None


def shutdown_engine(llm) -> None:
    """Stop an LLM's engine core process (the object itself is freed by the caller)."""
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception:
        pass


def release_engine_memory() -> None:
    """After the LLM is freed: what vLLM's own test runner does between engines (distributed
    state torn down, GPU memory emptied), so that the same process can start another."""
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    cleanup_dist_env_and_memory()


def chat_template_fallback(model_type: str, model: str) -> Path | None:
    """The chat template vLLM falls back to for a model type without one of its own."""
    from vllm.transformers_utils.chat_templates.registry import get_chat_template_fallback_path

    return get_chat_template_fallback_path(model_type, model)


def chat_template_content_format(chat_template: str) -> str:
    """`"string"` or `"openai"`: whether vLLM sends this template string content or typed parts
    (vLLM inspects the template's Jinja AST for loops over `message['content']`)."""
    from vllm.renderers.hf import _detect_content_format

    return _detect_content_format(chat_template, default="string")


@lru_cache(maxsize=None)
def engine_arg_types() -> dict[str, object]:
    """EngineArgs field name -> its declared type (the dataclass, not a constructed instance:
    building EngineArgs for a Hub model id downloads the model in __post_init__)."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    return {f.name: f.type for f in dataclasses.fields(EngineArgs)}


def supported_architectures() -> set[str]:
    from vllm.model_executor.models.registry import ModelRegistry

    return set(ModelRegistry.get_supported_archs())


def load_model_class(arch: str) -> type:
    """Import the class serving `arch` (raises what the import raises: this is where a
    transformers upgrade that removed a symbol vLLM imports shows up)."""
    from vllm.model_executor.models.registry import ModelRegistry

    return ModelRegistry.models[arch].load_model_cls()


def is_multimodal_class(model_cls: type) -> bool:
    from vllm.model_executor.models.interfaces import supports_multimodal

    return bool(supports_multimodal(model_cls))


def takes_modality(model_cls: type, modality: str) -> tuple[bool, str | None]:
    """Whether the model takes a modality, and the placeholder vLLM's chat API writes for one
    item (None where the model's processor inserts the media tokens itself). vLLM's models
    raise for a modality they do not take."""
    try:
        return True, model_cls.get_placeholder_str(modality, 1)
    except (ValueError, NotImplementedError, KeyError):
        return False, None


# Engine args that shape the model config, and so the multimodal processor.
MODEL_CONFIG_ARGS = ("dtype", "max_model_len", "limit_mm_per_prompt", "mm_processor_kwargs", "hf_overrides",
                     "trust_remote_code", "tokenizer_mode", "revision", "mm_processor_cache_gb")


def create_processor(local_dir: str, engine_args: dict, cached: bool = False):
    """vLLM's multimodal processor for a local checkpoint, built on CPU (no engine, no GPU).

    `cached`: with the processor cache an engine has by default (mm_processor_cache_gb > 0).
    vLLM then runs the HF processor on the text and on the media separately and applies the
    placeholder updates itself; without it, the HF processor sees both at once. The two paths
    can treat the same input differently (a placeholder typed into the question)."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.cache import MultiModalProcessorOnlyCache

    kwargs = {k: v for k, v in engine_args.items() if k in MODEL_CONFIG_ARGS}
    kwargs.setdefault("dtype", "bfloat16")
    config = ModelConfig(model=local_dir, tokenizer=local_dir, **kwargs)
    return MULTIMODAL_REGISTRY.create_processor(config, cache=MultiModalProcessorOnlyCache(config) if cached else None)


def apply_processor(processor, prompt: str, mm_data: dict) -> dict:
    """Run the processor on one prompt with its media: token ids and placeholder ranges."""
    out = processor(prompt, mm_items=processor.info.parse_mm_data(mm_data), hf_processor_mm_kwargs={})
    return {
        "prompt_token_ids": list(out["prompt_token_ids"]),
        "placeholders": {m: [(p.offset, p.length) for p in ranges] for m, ranges in out["mm_placeholders"].items()},
    }


def vllm_config_class(model_type: str) -> type | None:
    """The config class vLLM defines itself for a model type transformers lacks (kimi_vl,
    deepseek_vl_v2, step3_vl, ...), or None."""
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    return _CONFIG_REGISTRY[model_type] if model_type in _CONFIG_REGISTRY else None
