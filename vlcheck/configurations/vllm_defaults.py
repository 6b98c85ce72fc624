"""The `defaults` configuration: the engine `vllm serve MODEL` starts, with only what a synthetic
checkpoint forces (its path, max_model_len, memory). vLLM picks the dtype (bfloat16 for these
float32 checkpoints), compiles with torch.compile and captures CUDA graphs (sizes up to
`registry.DEFAULTS_CAPTURE_TOKENS`, so that image prefills replay one), and turns chunked prefill
and prefix caching on as it does for users.

Held to this run's float32 eager engine (`offline.against_eager`) within the distance measured
between the two on the reference (bfloat16's rounding, stored per GPU with the eager golden), and
to the media-sensitivity test. The proof, read in the engine: the compilation mode, the attention
backends of the vision encoder and the decoder, and the model steps, of which some must have
prefilled an image under a replayed CUDA graph (on vLLM's CPU build, which has no CUDA graphs:
under the compiled model).
"""

from __future__ import annotations

from vlcheck.adapter import engine_paths
from vlcheck.configurations.offline import against_eager, generation, sees_media
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.spec.schema import FamilySpec, Variant

HELD_TO_EAGER_ENGINE = True

UNCOMPILED_MODES = ("NONE", "None")
RUNNER_VARIABLE = "VLLM_USE_V2_MODEL_RUNNER"
SECOND_RUNNER_MODULE = "vllm.v1.worker.gpu.model_runner"
"""Where vLLM's second model runner lives (0.24); the first is vllm.v1.worker.gpu_model_runner."""


def applies(spec: FamilySpec, variant: Variant, config: Configuration) -> str | None:
    """`defaults_v2` needs a vLLM that has a second model runner (its switch among vLLM's variables)."""
    if RUNNER_VARIABLE not in config.environment:
        return None
    if not engine_paths.vllm_has_variable(RUNNER_VARIABLE):
        return f"this vLLM has no second model runner ({RUNNER_VARIABLE} is not one of its variables)"
    return None


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    measured = Measured()
    try:
        engine_paths.start_steps(handle.llm)
        why_no_steps = None
    except engine_paths.StepsUnreadable as err:
        why_no_steps = str(err)
    runs = generation(spec, variant, handle, measured)
    steps = engine_paths.steps(handle.llm) if why_no_steps is None else None
    against_eager(spec, variant, handle, runs, measured, config)
    sees_media(spec, variant, handle, measured)
    proof(handle, steps, why_no_steps, measured)
    if measured.not_exercised is None and RUNNER_VARIABLE in config.environment:
        runner = measured.proof["model_runner"]
        if not runner.startswith(SECOND_RUNNER_MODULE):
            measured.not_exercised = f"{RUNNER_VARIABLE}=1, but the engine's worker ran {runner}"
    return measured


def proof(handle, steps: engine_paths.Steps | None, why_no_steps: str | None, measured: Measured) -> None:
    path = engine_paths.read_path(handle.llm)
    compiled = path["compilation"]
    config = handle.llm.llm_engine.vllm_config
    measured.proof = {"dtype": str(config.model_config.dtype).removeprefix("torch."),
                      "compilation_mode": compiled["mode"], "cudagraph_mode": compiled["cudagraph_mode"],
                      "largest_capture_size": compiled["largest_capture_size"], "model_runner": compiled["model_runner"],
                      "chunked_prefill": bool(config.scheduler_config.enable_chunked_prefill),
                      "prefix_caching": bool(config.cache_config.enable_prefix_caching),
                      "vision_encoder_attention": path["attention_backends"]["vision_encoder"] or "no vLLM attention layer",
                      "decoder_attention": path["attention_backends"]["decoder"]}
    if steps is not None:
        measured.proof.update(steps.summary())
    measured.not_exercised = why_path_did_not_run(handle.platform, measured.proof, why_no_steps)


def why_path_did_not_run(platform: str, proof: dict, why_no_steps: str | None) -> str | None:
    """None where the engine ran compiled and (on GPUs) a CUDA graph replayed an image prefill."""
    if proof["compilation_mode"] in UNCOMPILED_MODES:
        return f"the engine did not compile the model (compilation mode {proof['compilation_mode']})"
    if why_no_steps is not None:
        return f"the model runner's steps cannot be read in this vLLM: {why_no_steps}"
    if not proof["image_prefill_steps"]:
        return f"no model step computed media ({proof['steps']} steps)"
    if platform == "gpu" and not proof["image_prefill_replays"]:
        return (f"none of the {proof['image_prefill_steps']} steps that prefilled an image replayed a CUDA graph "
                f"(cudagraph mode {proof['cudagraph_mode']}, largest capture size {proof['largest_capture_size']}, "
                f"largest image prefill {proof['largest_image_prefill_tokens']} tokens)")
    return None
