"""vLLM's model registry: which architectures it serves, their classes, and what they take."""

from __future__ import annotations


def supported_architectures() -> set[str]:
    from vllm import ModelRegistry

    return set(ModelRegistry.get_supported_archs())


def load_model_class(arch: str) -> type:
    """Import the class serving `arch` (raises what the import raises: this is where a
    transformers upgrade that removed a symbol vLLM imports shows up)."""
    from vllm import ModelRegistry

    # vllm 0.24, 0.32: the registry's entries load their class lazily (`models[arch].load_model_cls()`)
    return ModelRegistry.models[arch].load_model_cls()


def is_multimodal_class(model_cls: type) -> bool:
    # vllm 0.24, 0.32: vllm.model_executor.models.interfaces.supports_multimodal
    from vllm.model_executor.models.interfaces import supports_multimodal

    return bool(supports_multimodal(model_cls))


def takes_modality(model_cls: type, modality: str, item: int = 1) -> tuple[bool, str | None]:
    """Whether the model takes a modality, and the placeholder vLLM's chat API writes for its
    `item`-th item (None where the model's processor inserts the media tokens itself). vLLM's
    models raise for a modality they do not take."""
    try:
        return True, model_cls.get_placeholder_str(modality, item)
    except (ValueError, NotImplementedError, KeyError):
        return False, None
