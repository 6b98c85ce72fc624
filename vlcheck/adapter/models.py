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


def warm_model_info_cache(archs: list[str]) -> dict[str, str]:
    """Fill vLLM's model-info cache (`$VLLM_CACHE_ROOT/modelinfos`) for these architectures in this
    one process. vLLM inspects each architecture in a fresh subprocess the first time a config
    names it (so as not to initialise CUDA in the caller): 60-odd imports of vLLM, about 380 s of
    CPU per cold release. Here nothing initialises CUDA (a CPU-only caller), and the cached info is
    the same: `_ModelInfo.from_model_cls` of the loaded class, saved under the model file's hash.
    Returns {arch: error} for the ones that could not be inspected (vLLM then tries again itself)."""
    import vllm.model_executor.models.registry as registry
    from vllm import ModelRegistry

    errors = {}
    # vllm 0.24-0.32: _run_in_subprocess(fn) runs fn in a subprocess; _LazyRegisteredModel.inspect_model_cls
    # reads and writes the cache around it
    in_subprocess = registry._run_in_subprocess
    registry._run_in_subprocess = lambda fn: fn()
    # an architecture vLLM does not register is served by its Transformers backend (vllm 0.24-0.32:
    # registry entries named Transformers*), inspected the same way
    backend = sorted(a for a in ModelRegistry.models if a.startswith("Transformers"))
    try:
        for arch in [*archs, *backend]:
            model = ModelRegistry.models.get(arch)
            if model is None or not hasattr(model, "inspect_model_cls"):
                continue
            try:
                model.inspect_model_cls()
            except Exception as err:  # an import that fails here fails in vLLM's subprocess too
                errors[arch] = f"{type(err).__name__}: {str(err)[:200]}"
    finally:
        registry._run_in_subprocess = in_subprocess
    return errors
