"""The tensor-parallel configurations (`tp2`, `encoder_dp`): the family-config's tensor-parallel-ready
checkpoint (`engine.tensor_parallel`: 8 heads, seeded weights) served over 2 GPUs, held to the same
checkpoint at TP=1 by vLLM's `check_logprobs_close` rule (two shardings reduce in another order: another
implementation, not a repeat), and to the media-sensitivity test.

`encoder_dp` keeps the language model sharded and runs the vision encoder data-parallel
(`mm_encoder_tp_mode="data"`), a path of its own in each model (`run_dp_sharded_*_vision_model`).
The proof is read from the running engine: one answer per tensor-parallel worker, and the encoder
mode in its config. The TP=1 reference engine runs beside the TP=2 one for the length of the check.
"""

from __future__ import annotations

from vlcheck import adapter
from vlcheck.configurations.offline import generation, sees_media
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.engine import goldens
from vlcheck.engine import runs as g
from vlcheck.engine.tensor_parallel import plan
from vlcheck.spec.schema import FamilySpec, Variant

SIZE = 2


def applies(spec: FamilySpec, variant: Variant, config: Configuration | None = None) -> str | None:
    """Why the TP-ready checkpoint cannot be split over 2 ranks (a head count that does not divide), or,
    for `encoder_dp`, why vLLM would not run this model's encoder data-parallel; else None."""
    why = plan(spec, variant).why_not(SIZE)
    if why is None and config is not None and wants_data_parallel_encoder(config):
        why = encoder_not_data_parallel(variant.architecture)
    return why


def wants_data_parallel_encoder(config: Configuration) -> bool:
    return config.engine_args.get("mm_encoder_tp_mode") == "data"


def encoder_not_data_parallel(architecture: str) -> str | None:
    """vLLM runs an encoder data-parallel only where the model class says it can
    (`supports_encoder_tp_data`); elsewhere it warns and shards the encoder by weights, and a TP=2
    engine started to learn that (70 s on an H100) proves nothing: say so before any engine starts."""
    try:
        model_cls = adapter.load_model_class(architecture)
    except Exception:  # noqa: BLE001 - no class to ask: the engine's start will say it
        return None
    if getattr(model_cls, "supports_encoder_tp_data", False):
        return None
    return (f"vLLM's {model_cls.__name__} has no data-parallel encoder (supports_encoder_tp_data is False): "
            "with mm_encoder_tp_mode=data vLLM shards its encoder by weights, as tp2 does")


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    measured = Measured(reference="TP=1 on the same checkpoint")
    runs = generation(spec, variant, handle, measured)
    sharding_proof(handle, config, measured)
    reference = tp1_outputs(spec, variant, handle)
    measured.facts["distance_to_tp1"] = {r.shape: goldens.largest_difference(reference[r.shape], r.outputs) for r in runs}
    measured.problems += [f"{r.shape}: TP={SIZE} against TP=1: {p}" for r in runs
                          for p in goldens.logprobs_close(reference[r.shape], r.outputs)]
    sees_media(spec, variant, handle, measured)
    return measured


def sharding_proof(handle, config: Configuration, measured: Measured) -> None:
    workers = len(adapter.loaded_layer_methods(handle.llm))
    multimodal = handle.llm.llm_engine.vllm_config.model_config.multimodal_config
    mode = getattr(multimodal, "mm_encoder_tp_mode", None)
    measured.proof = {"tensor_parallel_workers": workers, "mm_encoder_tp_mode": mode}
    if workers != SIZE:
        measured.not_exercised = f"the engine answered from {workers} worker(s), not {SIZE}"
    elif wants_data_parallel_encoder(config) and mode != "data":
        measured.not_exercised = f"the engine's mm_encoder_tp_mode is {mode!r}: the encoder was not run data-parallel"


_TP1: dict[tuple, dict[str, list[dict]]] = {}
"""TP=1 outputs measured in this process: tp2 and encoder_dp share one reference engine start."""


def tp1_outputs(spec: FamilySpec, variant: Variant, handle) -> dict[str, list[dict]]:
    """The example's requests on the same checkpoint, weights and dtype at TP=1, in an engine of its own."""
    from vlcheck.engine.engines import EngineCache

    key = (spec.name, variant.kind, handle.platform, handle.dtype, handle.model_dir)
    if key not in _TP1:
        cache = EngineCache()
        try:
            tp1 = cache.get(spec, variant, "seeded", handle.platform, checkpoint="tp_ready", dtype=handle.dtype)
            _TP1[key] = {r.shape: r.outputs for r in g.generation_runs(spec, variant, tp1)}
        finally:
            cache.close()
    return _TP1[key]
