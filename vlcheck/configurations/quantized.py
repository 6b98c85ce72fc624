"""The fp8 configuration: vLLM's online fp8 quantization of the unquantized weights
(`quantization="fp8"`, computed in bfloat16, the activations its kernels take).

Quantized outputs are not the eager ones, so fp8 keeps goldens of its own (label `<weights>-fp8`),
recorded with their measured noise like the eager ones, each request in a batch of its own: fp8's
dynamic per-tensor activation scale is taken over the whole batch, so a request's neighbours move
its output (up to 0.73 nats on an H100, llava-onevision multi_image; recorded as the fact
`batch_dependence_nats`), and batched goldens would need tolerances that hide any change. Held to
them within 3 x that noise; held to the unquantized output within 3 x the distance measured when
they were recorded (a quantization that drifts further, say by dropping a layer's scales, fails
even where its own golden was re-recorded); and to the media-sensitivity test. The proof: layers of the loaded model run an fp8
method (`adapter.loaded_layer_methods`), read in the engine, not taken from the config.

The checkpoint formats (`quant_w4a16`, `quant_w4a16_asym`, `quant_w8a16`, `quant_w8a8`,
`quant_fp8_dynamic`) load the seeded checkpoint as compressed-tensors wrote it in that format
(`checkpoints.quantized`: the language model quantized, the vision tower, projector and output head
in the config's ignore list) and are judged the same way, against goldens of their own (label
`<weights>-<configuration>`). Their proof is the loaded model's linear layers per part
(`adapter.loaded_layer_kernels`: method, scheme and kernel): the language model runs a quantized
method, and a vision tower or projector layer that runs one is a problem (the ignore list was not
applied to it: the wrapper's weight-name mapping lost it).
"""

from __future__ import annotations

from vlcheck import adapter
from vlcheck.configurations.offline import generation, sees_media
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.engine import goldens, noise
from vlcheck.engine.engines import QUANTIZED_PREFIX, SEEDED_DTYPES
from vlcheck.engine.runs import ShapeRun, batch_dependence, record_golden, remeasured_noise
from vlcheck.spec.schema import FamilySpec, Variant, config_id


def golden_label(handle, configuration: str = "fp8") -> str:
    return f"{handle.label}-{configuration}"


def unquantized_golden(spec: FamilySpec, variant: Variant, handle) -> goldens.Golden | None:
    """The eager engine's golden of the same weights (seeded ones: float32 where it ran, else bfloat16)."""
    labels = [f"seeded-{d}" for d in SEEDED_DTYPES] if handle.weights == "seeded" else [handle.label]
    for label in labels:
        stored = goldens.load(goldens.golden_path(label, config_id(spec, variant), handle.platform))
        if stored is not None:
            return stored
    return None


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    measured = Measured()
    handle.one_request_per_batch = True
    runs = generation(spec, variant, handle, measured)
    measured.facts["batch_dependence_nats"] = batch_dependence(spec, variant, handle)
    if config.checkpoint.startswith(QUANTIZED_PREFIX):
        checkpoint_proof(handle, config.checkpoint.removeprefix(QUANTIZED_PREFIX), measured)
    else:
        fp8_proof(handle, measured)
    if measured.problems:  # the model did not load as written: its outputs can be neither a golden nor held to one
        measured.facts["golden"] = "not compared: the loaded layers are not the checkpoint's"
    else:
        against_goldens(spec, variant, handle, runs, measured, config.name)
    sees_media(spec, variant, handle, measured)
    return measured


UNQUANTIZED = "Unquantized"
"""vLLM's method of a layer that runs unquantized (`UnquantizedLinearMethod`)."""


def checkpoint_proof(handle, fmt: str, measured: Measured) -> None:
    """The loaded layers per part: the language model quantized, the vision tower and projector not
    (the checkpoint's ignore list names every one of their linear layers)."""
    per_rank = adapter.loaded_layer_kernels(handle.llm)
    parts = per_rank[0] if per_rank else {}
    quantized = {part: {k: n for k, n in kernels.items() if not k.startswith(UNQUANTIZED)} for part, kernels in parts.items()}
    measured.proof = {"format": fmt, "layers": parts}
    measured.facts["quantized_parts"] = sorted(part for part, kernels in quantized.items() if kernels)
    for part in sorted(quantized):
        if part != "language_model" and quantized[part]:
            measured.problems.append(f"the {part}'s linear layers run {quantized[part]}, but the checkpoint's ignore list "
                                     f"leaves them unquantized (their weights were written unquantized)")
    if not quantized.get("language_model"):
        measured.not_exercised = (f"no linear layer of the language model runs a quantized method (the loaded layers: "
                                  f"{parts})")


def fp8_proof(handle, measured: Measured) -> None:
    per_rank = adapter.loaded_layer_methods(handle.llm)
    methods = per_rank[0] if per_rank else {}
    fp8 = {name: n for name, n in methods.items() if "fp8" in name.lower()}
    measured.proof = {"fp8_layers": sum(fp8.values()), "layer_methods": methods}
    if not fp8:
        measured.not_exercised = f"no loaded layer runs an fp8 method (the layers' methods: {methods})"


def against_goldens(spec: FamilySpec, variant: Variant, handle, runs: list[ShapeRun], measured: Measured,
                    configuration: str = "fp8") -> None:
    actual = {r.shape: r.outputs for r in runs}
    unquantized = unquantized_golden(spec, variant, handle)
    distance = ({shape: goldens.largest_difference(unquantized.outputs.get(shape, []), out) for shape, out in actual.items()}
                if unquantized else {})
    measured.facts["distance_to_unquantized"] = distance or "no unquantized golden recorded"
    measured.reference = f"its own {configuration} golden, near the unquantized one"
    path = goldens.golden_path(golden_label(handle, configuration), config_id(spec, variant), handle.platform,
                               recording=handle.goldens_mode == "record")
    stored = goldens.load(path)
    if handle.goldens_mode == "record":
        measured.problems += [f"{shape}: the outputs cannot be a golden: {p}" for shape, out in actual.items()
                              for p in goldens.unusable(out)]
        if not measured.problems:
            record_golden(spec, variant, handle, path, actual, distance_to_unquantized=distance)
        measured.facts["golden"] = "recorded"
        return
    if stored is None:
        measured.facts["golden"] = f"no {configuration} golden recorded"
        if handle.platform == "cpu":  # a machine of another instruction-set class than those recorded
            measured.not_compared = goldens.missing_golden(path, f"{configuration} golden")
        else:
            measured.problems.append(goldens.missing_golden(path, f"{configuration} golden"))
        return
    if handle.goldens_mode == "measure_noise":
        try:
            stored = remeasured_noise(spec, variant, handle, path, stored)
        except ValueError as err:  # another vLLM, torch or dtype than the golden's
            measured.problems.append(str(err))
            return
    measured.held_to_golden(goldens.compare_shapes(stored, actual, goldens.environment(handle.dtype, handle.model_dir)),
                            f"the {configuration} golden")
    recorded = stored.extra.get("distance_to_unquantized") or {}
    for shape, now_nats in distance.items():
        if shape in recorded and now_nats > (bound := noise.scaled(recorded[shape])):
            measured.problems.append(f"{shape}: {now_nats} nats from the unquantized output, over {bound} "
                                     f"({noise.NOISE_FACTOR} x the {recorded[shape]} measured when the golden was recorded)")
