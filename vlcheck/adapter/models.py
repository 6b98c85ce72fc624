"""vLLM's model registry: which architectures it serves, their classes, and what they take."""

from __future__ import annotations

from functools import lru_cache


def supported_architectures() -> set[str]:
    from vllm import ModelRegistry

    return set(ModelRegistry.get_supported_archs())


def load_model_class(arch: str) -> type:
    """Import the class serving `arch` (raises what the import raises: this is where a
    transformers upgrade that removed a symbol vLLM imports shows up)."""
    from vllm import ModelRegistry

    # vllm 0.24, 0.32: the registry's entries load their class lazily (`models[arch].load_model_cls()`)
    return ModelRegistry.models[arch].load_model_cls()


def class_supports(model_cls: type, feature: str) -> bool:
    """vLLM's own interface checks: `lora` (SupportsLoRA), `pipeline_parallel` (SupportsPP),
    `tower_connector_lora` (LoRA on the vision tower and connector, `tower_lora_declared`)."""
    # vllm 0.24, 0.33: vllm.model_executor.models.interfaces
    from vllm.model_executor.models.interfaces import supports_lora, supports_multimodal, supports_pp

    checks = {"lora": supports_lora, "pipeline_parallel": supports_pp,
              "tower_connector_lora": lambda c: supports_lora(c) and supports_multimodal(c) and tower_lora_declared(c)}
    return bool(checks[feature](model_cls))


def tower_lora_declared(model_cls: type) -> bool:
    """Whether the model class itself says it takes LoRA on its tower and connector. vllm >= 0.32: the class
    flag `supports_tower_connector_lora`. vllm 0.24 asks `hasattr(model, "get_num_mm_encoder_tokens")`, which
    every multimodal class passes (SupportsMultiModal defines a stub returning None): only a class whose own
    implementation replaces the stub takes it (mistral3 and minicpmv, stub only, crash at engine start with
    enable_tower_connector_lora: `torch.empty(None)` in the tower's punica wrapper, H200, vLLM 0.24.0)."""
    from vllm.model_executor.models.interfaces import SupportsMultiModal

    flag = getattr(model_cls, "supports_tower_connector_lora", None)
    if flag is not None:
        return bool(flag)
    own = getattr(model_cls, "get_num_mm_encoder_tokens", None)
    return own is not None and own is not getattr(SupportsMultiModal, "get_num_mm_encoder_tokens", None)


@lru_cache(maxsize=None)
def class_import_error(arch: str) -> BaseException | None:
    """What importing the class serving `arch` raises (None: it imports), once per process: Python
    keeps no failed import, and each check of the family would run the import again."""
    try:
        load_model_class(arch)
    except Exception as err:  # noqa: BLE001 - the import's own exception is the answer
        return err
    return None


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


def _here(fn):
    return fn()


def inspect_in_this_process() -> bool:
    """Where no GPU is visible, let vLLM inspect a model class in this process instead of a fresh
    subprocess (returns whether it now does). vLLM does it the first time a config names an
    architecture whose model file its model-info cache (`$VLLM_CACHE_ROOT/modelinfos`) has no entry
    for, so as not to initialise CUDA in the caller: an import of vLLM and torch each, 8-10 s on 2
    cores. The cache is keyed by the model file's hash, so the two ends of an upgrade evict each
    other's entries, and a cold candidate paid them in most of its 63 families (vLLM 0.33.0: the
    `processor` check's 412 of 732 CPU seconds). In this process the class is imported anyway (its
    processor needs it), and the info saved is the same: `_ModelInfo.from_model_cls` of it, which an
    API server started later then reads from the cache."""
    import vllm.model_executor.models.registry as registry

    # vllm 0.24-0.33: _run_in_subprocess(fn) runs fn in a subprocess; _LazyRegisteredModel.inspect_model_cls
    # reads and writes the cache around it
    if getattr(registry, "_run_in_subprocess", None) is _here:
        return True
    import torch

    if torch.cuda.is_available() or not callable(getattr(registry, "_run_in_subprocess", None)):
        return False
    registry._run_in_subprocess = _here
    return True


def warm_model_info_cache(archs: list[str]) -> dict[str, str]:
    """Fill vLLM's model-info cache (`$VLLM_CACHE_ROOT/modelinfos`) for these architectures in this
    one process (`inspect_in_this_process`; a CPU-only caller). Returns {arch: error} for the ones
    that could not be inspected (vLLM then tries again itself)."""
    from vllm import ModelRegistry

    inspect_in_this_process()
    errors = {}
    # an architecture vLLM does not register is served by its Transformers backend (vllm 0.24-0.32:
    # registry entries named Transformers*), inspected the same way
    backend = sorted(a for a in ModelRegistry.models if a.startswith("Transformers"))
    for arch in [*archs, *backend]:
        model = ModelRegistry.models.get(arch)
        if model is None or not hasattr(model, "inspect_model_cls"):
            continue
        try:
            model.inspect_model_cls()
        except Exception as err:  # an import that fails here fails in vLLM's subprocess too
            errors[arch] = f"{type(err).__name__}: {str(err)[:200]}"
    return errors


def model_info(arch: str):
    """vLLM's inspection of the class serving `arch` (`_ModelInfo`: supports_multimodal, ...), read
    from its model-info cache or made and saved there (vllm 0.24-0.33: the lazy registry entry's
    `inspect_model_cls`)."""
    from vllm import ModelRegistry

    return ModelRegistry.models[arch].inspect_model_cls()
