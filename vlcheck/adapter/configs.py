"""Config classes for a model type: transformers' own, or the one vLLM defines for a model type
transformers lacks (kimi_vl, deepseek_vl_v2, step3_vl, ...)."""

from __future__ import annotations


def transformers_config_class(model_type: str) -> type | None:
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type] if model_type in CONFIG_MAPPING else None


def vllm_config_class(model_type: str) -> type | None:
    # vllm 0.24, 0.32: vllm.transformers_utils.config._CONFIG_REGISTRY (model_type -> class)
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    return _CONFIG_REGISTRY[model_type] if model_type in _CONFIG_REGISTRY else None
