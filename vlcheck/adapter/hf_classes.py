"""transformers' auto-class tables and tokenizer internals that the synthetic checkpoint builder
needs: which processor, image processor, video processor and feature extractor a model type uses,
and the processor-facing special tokens (`image_token`, ...) a tokenizer saves."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vlcheck.adapter.generations import record

PER_BACKEND_VIDEO = "video processors keyed by backend, {'torchvision': name} (transformers 5.19)"
PLAIN_VIDEO = "video processors as plain class names (transformers 5.16)"

# Image processors are keyed by backend in both; the builder has always taken the PIL one.
BACKEND_PREFERENCE = ("pil", "torchvision")


@dataclass(frozen=True)
class ProcessorClasses:
    """Class names in the `transformers` namespace, None where the model type has none."""

    processor: str | None
    image_processor: str | None
    video_processor: str | None
    feature_extractor: str | None


def _one_name(entry: str | dict | None) -> str | None:
    # transformers 5.16: image entries {'pil': ..., 'torchvision': ...}, video entries str;
    # 5.19: both keyed by backend. A backend whose package is missing maps to None.
    if isinstance(entry, dict):
        return next((entry[b] for b in BACKEND_PREFERENCE if entry.get(b)), None)
    return entry


@lru_cache(maxsize=None)
def generation() -> str:
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    keyed = any(isinstance(v, dict) for v in VIDEO_PROCESSOR_MAPPING_NAMES.values())
    return record("auto processor tables", PER_BACKEND_VIDEO if keyed else PLAIN_VIDEO)


def processor_classes(model_type: str) -> ProcessorClasses:
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    generation()
    return ProcessorClasses(
        processor=_one_name(PROCESSOR_MAPPING_NAMES.get(model_type)),
        image_processor=_one_name(IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)),
        video_processor=_one_name(VIDEO_PROCESSOR_MAPPING_NAMES.get(model_type)),
        feature_extractor=_one_name(FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)),
    )


def processor_attributes(processor_class: type) -> list[str]:
    """The parts a processor class is built from (`image_processor`, `tokenizer`, ...)."""
    # transformers 5.16, 5.19: ProcessorMixin.get_attributes()
    if hasattr(processor_class, "get_attributes"):
        return list(processor_class.get_attributes())
    return ["image_processor", "tokenizer"]


def name_special_tokens(tokenizer, named: dict[str, str]) -> None:
    """Save processor-facing token names (`image_token`, `boi_token`, ...) with the tokenizer,
    which then has `<name>` and `<name>_id` properties, as the Hub's tokenizers do."""
    # transformers 5.16, 5.19: PreTrainedTokenizerBase._set_model_specific_special_tokens
    tokenizer._set_model_specific_special_tokens(special_tokens=named)


def class_at(path: str):
    """A class a spec's recipe names by import path (transformers', vLLM's or a processor module's):
    the builder's one dynamic import of package internals, kept here with the others. Raises
    ImportError or AttributeError when the installed packages do not have it."""
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def import_auto_tables() -> None:
    """Import what a checkpoint build reaches through transformers' lazy module, once, before threads
    build checkpoints side by side: two threads first touching it at once made one of them raise
    "cannot import name 'CONFIG_MAPPING' from 'transformers'" (aria's served cell, an `error` at 12 of
    17 matrix points, where each new environment builds its checkpoints anew)."""
    import transformers.models.auto.configuration_auto  # noqa: F401
    import transformers.models.auto.image_processing_auto  # noqa: F401
    import transformers.models.auto.processing_auto  # noqa: F401
    import transformers.models.auto.tokenization_auto  # noqa: F401
    from transformers import CONFIG_MAPPING  # noqa: F401
