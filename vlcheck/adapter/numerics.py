"""The transformers and vLLM internals that numerical conformance needs, in one place.

- transformers 5 renames the legacy tensor names of Hub checkpoints to its own module names when it
  loads them (a per-model *checkpoint conversion mapping*), and `save_pretrained` reverts that
  mapping, except the `PrefixChange` steps of a model built from a config (it cannot know whether
  the prefix was there): LLaVA's CLIP tower is then saved as `vision_tower.embeddings.*` where
  the Hub (and vLLM's loader) has `vision_tower.vision_model.embeddings.*`. Here the whole
  mapping is reverted.
- vLLM's model classes map the Hub names to their own (`hf_to_vllm_mapper`, stacked q/k/v and
  gate/up projections) in `load_weights`; `vllm_load_report` builds the model on CPU and runs it,
  which is the evidence that a checkpoint is in the layout vLLM expects.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class NoTransformersModel(RuntimeError):
    """transformers has no model class for this architecture (a model vLLM implements alone)."""


def hf_model_class(config, architecture: str) -> type:
    """transformers' class for a checkpoint: the one its `architectures` names, else the
    image-text-to-text class of its config (vLLM names some architectures itself: Mantis,
    Tarsier, LightOnOCR are LLaVA / Mistral3 checkpoints)."""
    import transformers
    from transformers import AutoModelForImageTextToText

    cls = getattr(transformers, architecture, None)
    if isinstance(cls, type) and hasattr(cls, "_from_config"):
        return cls
    try:
        return AutoModelForImageTextToText._model_mapping[type(config)]
    except KeyError:
        raise NoTransformersModel(f"transformers {transformers.__version__} has no model class for "
                                  f"{architecture} (config {type(config).__name__})") from None


def hub_layout_tensors(model) -> dict[str, Any]:
    """The model's tensors under the Hub checkpoint's names (tied copies dropped, as saved)."""
    from safetensors.torch import load_file
    from transformers.conversion_mapping import get_model_conversion_mapping

    # save_pretrained reverts `_weight_conversions` when the model has them (as after
    # from_pretrained): give it the whole mapping, PrefixChange steps included.
    conversions = _first_per_source(get_model_conversion_mapping(model, add_legacy=False))
    for conversion in conversions:
        for op in getattr(conversion, "operations", ()):
            # A Transpose that checks shapes compares the tensor with the model's own parameter
            # and, reversed on save, never transposes (Qwen3-VL-MoE's fused experts were saved
            # in transformers' layout, refused by vLLM): from a fresh model it always must.
            if type(op).__name__ == "Transpose":
                op.check_dims = False
    model._weight_conversions = conversions or None
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tensors: dict[str, Any] = {}
        for file in sorted(Path(tmp).glob("*.safetensors")):
            tensors.update(load_file(file))
    return tensors


def _first_per_source(conversions: list) -> list:
    """The mapping without a later renaming of the same source pattern: transformers 5.16.1 lists
    Qwen2-Audio's `^language_model.model -> model.language_model` and then a generic
    `^language_model.model -> language_model`; reversed on save, both apply, and the checkpoint got
    `language_model.model.model.*`, which vLLM refuses (the Hub's is `language_model.model.*`)."""
    seen, kept = set(), []
    for conversion in conversions:
        source = tuple(getattr(conversion, "source_patterns", ()) or ())
        if source and source in seen:
            continue
        seen.add(source)
        kept.append(conversion)
    return kept


@dataclass
class LoadReport:
    """What a loader did with a checkpoint's tensors."""

    missing: list[str] = field(default_factory=list)
    """The model's parameters no checkpoint tensor filled."""

    unexpected: list[str] = field(default_factory=list)
    """Checkpoint tensors the model has no place for (vLLM: refused, with its reason)."""

    mismatched: list[str] = field(default_factory=list)

    skipped: list[str] = field(default_factory=list)
    """vLLM only: tensors its model ignores on purpose (LLaVA's vision layers after the feature
    layer are never built), so they fill nothing without an error."""

    @property
    def clean(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)


def hf_config(folder: str | Path):
    """transformers' config of a checkpoint folder (AutoConfig.from_pretrained)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder)


def hf_load(folder: str | Path, architecture: str, dtype: str = "float32"):
    """(model, LoadReport): transformers' from_pretrained of a checkpoint folder."""
    import torch
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    cls = hf_model_class(config, architecture)
    model, info = cls.from_pretrained(folder, config=config, dtype=getattr(torch, dtype), output_loading_info=True)
    model.eval()
    report = LoadReport(sorted(info.get("missing_keys", ())), sorted(info.get("unexpected_keys", ())),
                        sorted(str(m) for m in info.get("mismatched_keys", ())))
    return model, report


def hf_processor(folder: str | Path, processor_class: str | None = None, trust_remote_code: bool = False):
    """The checkpoint's HF processor: the recipe's class where transformers' auto mapping has none
    (vLLM ships some: Tarsier's), which AutoProcessor would silently replace by the tokenizer.
    `trust_remote_code`: the checkpoint's own processor code runs (where the example trusts it)."""
    import importlib

    from transformers import AutoProcessor

    if processor_class:
        module, _, name = processor_class.rpartition(".")
        return getattr(importlib.import_module(module), name).from_pretrained(folder, trust_remote_code=trust_remote_code)
    # never unset: with remote code and no answer, transformers asks on stdin (a `vlcheck check` in a
    # terminal would wait for a person)
    return AutoProcessor.from_pretrained(folder, trust_remote_code=trust_remote_code)


def require_transformers_model(folder: str | Path, architecture: str) -> None:
    """Raises NoTransformersModel unless transformers can build this checkpoint's model."""
    from transformers import AutoConfig

    remote = json.loads((Path(folder) / "config.json").read_text()).get("auto_map", {})
    if "AutoConfig" in remote and not any(k.startswith("AutoModel") for k in remote):
        raise NoTransformersModel(f"transformers cannot build {architecture} here: the config is remote code "
                                  f"({remote['AutoConfig']}) and the checkpoint ships no modeling code")
    try:
        config = AutoConfig.from_pretrained(folder)
    except (ValueError, KeyError) as err:  # a model type only vLLM defines
        raise NoTransformersModel(f"transformers cannot read the config: {str(err)[:160]}") from None
    hf_model_class(config, architecture)


def hf_inputs(processor, prompt: str, modality: str, items: list, processor_kwargs: dict) -> dict:
    """The HF processor's model inputs for one prompt and its media (a batch of one), with the
    example's mm_processor_kwargs as vLLM passes them. Audio clips are given at the feature
    extractor's rate (the suite's clips are made at it, so vLLM does not resample them). Videos given with metadata (the
    examples' `(frames, metadata)` pairs) are not resampled, as vLLM does not resample them."""
    takers = ("feature_extractor", "audio_processor") if modality == "audio" else (f"{modality}_processor",)
    if not any(hasattr(processor, name) for name in takers):
        raise ValueError(f"{type(processor).__name__} has no {modality} processor: the media would be dropped")
    kwargs: dict[str, Any] = {"text": [prompt], "return_tensors": "pt", **processor_kwargs}
    if modality == "image":
        kwargs["images"] = list(items)
    elif modality == "audio":  # (samples, rate) clips at the feature extractor's rate (media.AUDIO_RATE)
        kwargs["audio"] = [samples for samples, _ in items]
        kwargs["sampling_rate"] = items[0][1]
    else:
        clips = [item[0] if isinstance(item, tuple) else item for item in items]
        kwargs["videos"] = clips
        metadata = [item[1] for item in items if isinstance(item, tuple)]
        if metadata:
            keep = ("fps", "duration", "total_num_frames", "frames_indices")
            kwargs["video_metadata"] = [{k: m[k] for k in keep} for m in metadata]
            kwargs["do_sample_frames"] = False
    return dict(processor(**kwargs))


# --- vLLM's loader, on CPU --------------------------------------------------------------------


@contextlib.contextmanager
def _loader_platform():
    """vLLM's CPU platform for building a model, without its compiled ops.

    A CUDA build of vLLM on a machine without a GPU resolves no platform (device type ""), and
    its CPU platform makes custom ops grab `torch.ops._C` kernels in `__init__`, which that
    build lacks. The platform object every vLLM module already holds is switched to a CPU
    platform that is not `is_cpu()` (so the ops keep their native forward) for the duration, and
    switched back after, so the rest of the process is unaffected."""
    from vllm.platforms import current_platform
    from vllm.platforms.cpu import CpuPlatform
    from vllm.platforms.interface import PlatformEnum

    class LoaderOnlyPlatform(CpuPlatform):
        _enum = PlatformEnum.OOT

    if current_platform.device_type not in ("", "cpu"):  # a real GPU platform: leave it alone
        yield
        return
    original = current_platform.__class__
    current_platform.__class__ = LoaderOnlyPlatform
    try:
        yield
    finally:
        current_platform.__class__ = original


def _single_process_group() -> None:
    """vLLM's model classes read the parallel groups when built: a 1-process gloo world, as vLLM's
    own tests set up, made once per process and kept (tearing it down and making another in the
    same process can hang in gloo's rendezvous). The model-parallel groups are made again for each
    model: which exist depends on the current config (an expert-parallel group only for MoE)."""
    from vllm.distributed import parallel_state

    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    else:
        rendezvous = tempfile.mkdtemp(prefix="vlcheck-gloo-")
        parallel_state.init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                                    distributed_init_method=f"file://{rendezvous}/store",
                                                    backend="gloo")
    parallel_state.initialize_model_parallel(1, 1)


def vllm_load_report(folder: str | Path, engine_args: dict | None = None) -> LoadReport:
    """vLLM's model class for a checkpoint, built on CPU (a tiny model: no GPU needed) with every
    parameter set to NaN, and its `load_weights` fed the checkpoint one tensor at a time: the
    parameters left (partly) NaN (missing: no tensor filled them), the tensors it refused
    (unexpected, with vLLM's reason) and those it ignores on purpose (skipped)."""
    import torch
    from safetensors import safe_open
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model

    keep = ("trust_remote_code", "hf_overrides", "max_model_len", "limit_mm_per_prompt", "mm_processor_kwargs")
    args = {k: v for k, v in (engine_args or {}).items() if k in keep}
    report = LoadReport()
    from vlcheck.adapter.models import inspect_in_this_process

    inspect_in_this_process()
    with _loader_platform():
        config = EngineArgs(model=str(folder), tokenizer=str(folder), dtype="float32", enforce_eager=True,
                            **args).create_engine_config()
        with set_current_vllm_config(config), torch.no_grad():
            _single_process_group()
            with torch.device("cpu"):
                model = initialize_model(vllm_config=config)
            pending = list(model.parameters())
            for p in pending:
                p.fill_(float("nan"))
            returns_names = None  # whether this class's load_weights returns what it filled (most do)

            def unfilled() -> int:
                return sum(int(p.isnan().sum()) for p in pending)

            with safe_open(str(Path(folder) / "model.safetensors"), "pt") as f:
                for name in sorted(f.keys()):
                    before = None if returns_names else unfilled()
                    try:
                        loaded = model.load_weights([(name, f.get_tensor(name))])
                    except Exception as err:  # vLLM names what it has no place for
                        report.unexpected.append(f"{name} ({type(err).__name__}: {str(err)[:120]})")
                        continue
                    returns_names = loaded is not None
                    filled_nothing = not loaded if returns_names else unfilled() == before
                    if filled_nothing:
                        report.skipped.append(name)
            report.missing = sorted(n for n, p in model.named_parameters() if p.isnan().any())
    return report


# --- vLLM's processor outputs -------------------------------------------------------------------


def processor_outputs(processor, prompt: str, mm_data: dict) -> dict[str, Any]:
    """vLLM's processor on one prompt: `prompt_token_ids`, `placeholders` ({modality: [(offset,
    length)]}) and `tensors`, the model inputs of every item ({(modality, item index, field): tensor})."""
    proc = processor.vllm_processor
    extra = {"cache": processor.cache} if processor.cache_per_call else {}
    out = proc(prompt, mm_items=proc.info.parse_mm_data(mm_data), hf_processor_mm_kwargs={}, **extra)
    tensors = {}
    for modality, items in out["mm_kwargs"].items():
        for index, item in enumerate(items):
            if item is None:  # served from the processor cache: no tensors in this process
                continue
            for key, elem in item.items():
                tensors[(modality, index, key)] = getattr(elem, "data", elem)
    return {"prompt_token_ids": list(out["prompt_token_ids"]),
            "placeholders": {m: [(p.offset, p.length) for p in r] for m, r in out["mm_placeholders"].items()},
            "tensors": tensors}
