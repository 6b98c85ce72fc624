"""The configurations an offline engine runs (chunked, prefix, compiled, pp2, a user's flags): the
example's requests on an engine started with the configuration's args, held to the eager engine of
the same run (the family-config's shared engine: same build, versions and GPU) within the noise
stored with its golden, the media-sensitivity test, and the configuration's proof, recorded from
the scheduler's steps.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass

from vlcheck import adapter
from vlcheck.adapter import scheduler
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import PREFIX_BLOCK, Configuration
from vlcheck.engine import goldens
from vlcheck.engine import runs as g
from vlcheck.numerics import reference
from vlcheck.prompt.render import NUM_PROMPTS, request_prompts
from vlcheck.prompt.requests import example_prompt, example_prompts, media_data
from vlcheck.spec.schema import FamilySpec, Variant, config_id

HELD_TO_EAGER_ENGINE = True
"""Its engine is given the same run's eager outputs (`EngineHandle.eager_reference`, the pytest plugin)."""


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    measured = Measured()
    raw = handle.llm._llm
    why_no_steps = scheduler.available(raw)
    with (scheduler.recorded_steps(raw) if why_no_steps is None else nullcontext()) as log:
        runs = generation(spec, variant, handle, measured)
    against_eager(spec, variant, handle, runs, measured, config)
    sees_media(spec, variant, handle, measured)
    if config.name == "chunked":
        chunked_proof(log, why_no_steps, measured)
    elif config.name == "prefix":
        prefix_probes(spec, variant, handle, runs, measured)
    elif config.name == "compiled":
        compiled_proof(handle, measured)
    elif "pipeline_parallel_size" in config.engine_args:
        parallel_proof(handle, config, measured)
    else:  # a user's flags: the engine started with them
        measured.proof = {"engine_args": config.engine_args}
    return measured


def generation(spec: FamilySpec, variant: Variant, handle, measured: Measured) -> list[g.ShapeRun]:
    """The example's requests on the configured engine, their prompt token counts held to vLLM's processor."""
    runs = g.generation_runs(spec, variant, handle)
    measured.facts["prompt_tokens"] = {r.shape: r.prompt_tokens for r in runs}
    measured.problems += [f"{r.shape}: engine {r.prompt_tokens} prompt tokens, CPU processor {r.expected_prompt_tokens}"
                          for r in runs if r.prompt_tokens != r.expected_prompt_tokens]
    return runs


def against_eager(spec: FamilySpec, variant: Variant, handle, runs: list[g.ShapeRun], measured: Measured,
                  config: Configuration) -> None:
    """The outputs against this run's eager engine (token ids, top-5 logprobs, text): the same vLLM
    build, versions and GPU, so what moves is what the configuration changes (a release that moves the
    eager outputs is the eager golden's finding, once). The tolerance is the noise stored with the
    eager golden, this configuration's measured distance to the eager engine included
    (`--vlcheck-measure-noise` stores it; `--vlcheck-update-goldens` too)."""
    reference = handle.eager_reference
    path = goldens.golden_path(reference.label, config_id(spec, variant), handle.platform)
    stored = goldens.load(path)
    actual = {r.shape: r.outputs for r in runs}
    measured.reference = "this run's eager engine"
    measured.facts["distance_to_eager"] = {shape: goldens.largest_difference(reference.outputs.get(shape, []), out)
                                           for shape, out in actual.items()}
    if stored is None:
        measured.facts["golden"] = "no eager golden recorded"
        why = f"no measured noise to hold the configuration to: {goldens.missing_golden(path)} (the eager engine's)"
        if handle.platform == "cpu":  # a machine of another instruction-set class than those recorded
            measured.not_compared = why
        else:
            measured.problems.append(why)
        return
    if handle.goldens_mode in ("record", "measure_noise"):
        try:
            stored = g.with_configuration_distance(handle, path, stored, config.name, actual, reference.outputs,
                                                   reference.dtype, config.distance_ceiling)
        except ValueError as err:
            measured.problems.append(f"its distance to the eager engine not stored as noise: {err}")
    held_to = goldens.Golden(stored.recorded_on, reference.outputs, stored.noise)
    now = goldens.environment(reference.dtype, handle.model_dir)
    measured.held_to_golden(goldens.compare_shapes(held_to, actual, now, configuration=config.name,
                                                     noise_of=config.noise_of),
                            "this run's eager engine")


def sees_media(spec: FamilySpec, variant: Variant, handle, measured: Measured) -> None:
    """Other media must move the first step's top-5 logprobs (a configuration that drops the image
    would otherwise answer plausibly)."""
    if handle.weights == "synthetic-dummy":  # as the GPU tier's own media test: it needs seeded weights
        measured.facts["sees_media"] = ("not measured: vLLM's dummy weights (no seeded recipe for this family) "
                                        "give outputs that hardly depend on the media")
        return
    moved_by = {}
    for r in reference.requests(spec, variant):
        first = reference.vllm_first_step(handle.llm, r, new_tokens=1)["top_logprobs"][0]
        other = reference.vllm_first_step(handle.llm, r, r.other_items, new_tokens=1)["top_logprobs"][0]
        moved_by[r.shape] = reference.top_change(first, other)
    measured.facts["sees_media"] = {shape: change >= reference.SENSITIVITY_MIN for shape, change in moved_by.items()}
    measured.facts["media_change_nats"] = moved_by
    measured.problems += [f"{shape}: other media move the first-step top-5 logprobs by {change} nats "
                          f"(< {reference.SENSITIVITY_MIN}): the output does not see the media"
                          for shape, change in moved_by.items() if change < reference.SENSITIVITY_MIN]


def chunked_proof(log: scheduler.StepLog | None, why_no_steps: str | None, measured: Measured) -> None:
    if log is None:
        measured.not_exercised = f"the scheduler's steps cannot be recorded here: {why_no_steps}"
        return
    chunked = [r for r in log.requests.values() if r.prompt_tokens and len(r.prefill_ends(r.prompt_tokens)) > 0]
    inside = sum(len(r.ends_inside_media(r.prompt_tokens)) for r in chunked)
    measured.proof = {"requests": len(log.requests), "prefilled_in_chunks": len(chunked),
                      "chunk_ends_inside_media": inside, "steps": log.steps}
    if not chunked:
        measured.not_exercised = f"no prompt was prefilled in more than one step ({log.steps} steps)"
    elif not inside:
        ranges = sorted({m for r in chunked for m in r.media})
        measured.not_exercised = (f"{len(chunked)} prompts were prefilled in chunks, but no chunk ended inside a "
                                  f"placeholder range {ranges} (vLLM schedules each image whole for this model)")


PROBE_QUESTION = "Zebra stripes: count them, then answer in one word."
"""A question none of the example's requests asks: its prompt shares theirs up to where the question
starts, so the prefix cache serves it the blocks that hold the template and the image (the last
one ending inside the image where a block boundary falls there)."""


GRAPHS_CAPTURED = re.compile(r"Graph capturing finished in (\d+) secs")
"""vLLM's engine log line once its CUDA graphs are captured (gpu_model_runner, vllm 0.24)."""


def compiled_proof(handle, measured: Measured) -> None:
    log = getattr(handle.watchdog, "log", None)
    text = log.read_text(errors="replace") if log is not None and log.exists() else ""
    captured = GRAPHS_CAPTURED.findall(text)
    measured.proof = {"graph_captures": len(captured), "capture_s": [int(s) for s in captured]}
    if not captured:
        measured.not_exercised = (f"the engine's log ({log}) does not say CUDA graphs were captured "
                                  "('Graph capturing finished'): the engine ran eager")


def applies(spec: FamilySpec, variant: Variant, config: Configuration) -> str | None:
    """`pp2`: vLLM splits a model into pipeline stages only where its class says it can (`SupportsPP`);
    elsewhere its start refuses, which says nothing about pipeline parallelism."""
    if "pipeline_parallel_size" not in config.engine_args:
        return None
    try:
        model_cls = adapter.load_model_class(variant.architecture)
    except Exception:  # noqa: BLE001 - no class to ask: the engine's start will say it
        return None
    return None if adapter.class_supports(model_cls, "pipeline_parallel") else f"vLLM's {model_cls.__name__} does not support pipeline parallelism (SupportsPP)"


def parallel_proof(handle, config: Configuration, measured: Measured) -> None:
    """One answer per worker (tensor x pipeline ranks), and the engine's own parallel sizes and encoder mode
    as the configuration's engine args ask (`pp2` here; `tp2`, `tp4`, `pp2_tp2`, `encoder_dp*`: sharded.py)."""
    tp = int(config.engine_args.get("tensor_parallel_size", 1))
    pp = int(config.engine_args.get("pipeline_parallel_size", 1))
    workers = len(adapter.loaded_layer_methods(handle.llm))
    vllm_config = handle.llm.llm_engine.vllm_config
    parallel = vllm_config.parallel_config
    mode = getattr(vllm_config.model_config.multimodal_config, "mm_encoder_tp_mode", None)
    measured.proof = {"workers": workers, "tensor_parallel_size": parallel.tensor_parallel_size,
                      "pipeline_parallel_size": parallel.pipeline_parallel_size, "mm_encoder_tp_mode": mode}
    if (workers, parallel.tensor_parallel_size, parallel.pipeline_parallel_size) != (tp * pp, tp, pp):
        measured.not_exercised = (f"the engine answered from {workers} worker(s) at tensor_parallel_size "
                                  f"{parallel.tensor_parallel_size}, pipeline_parallel_size {parallel.pipeline_parallel_size}, "
                                  f"not {tp * pp} at {tp} x {pp}")
    elif config.engine_args.get("mm_encoder_tp_mode") == "data" and mode != "data":
        measured.not_exercised = f"the engine's mm_encoder_tp_mode is {mode!r}: the encoder was not run data-parallel"


@dataclass
class Probe:
    what: str
    cached: int
    where: str
    problems: list[str]


def prefix_probes(spec: FamilySpec, variant: Variant, handle, runs: list[g.ShapeRun], measured: Measured) -> None:
    """After the batch: a new question with the same media (its cached prefix ends where the
    questions part, often inside the image), held to the same request computed without the cache
    (another `cache_salt`: no block matches); and the first request again (cached up to its last
    block, after the image), held to its batched answer."""
    modality, count = variant.primary_modality, 1
    data = media_data(variant, modality, count)
    first = request_prompts(example_prompts(spec, variant, modality, count), NUM_PROMPTS, True)[0]
    novel = example_prompt(spec, variant, modality, PROBE_QUESTION, count)
    batched = next(r for r in runs if r.shape == f"{modality} x{count}").outputs[0]
    tolerance = goldens.REPEAT_TOLERANCE

    def ask(prompt: str, salt: str | None = None):
        one = {"prompt": prompt, "multi_modal_data": {modality: data}, **({"cache_salt": salt} if salt else {})}
        return handle.llm.generate([one], g.greedy(), use_tqdm=False)

    uncached = goldens.from_outputs(ask(novel, salt="vlcheck-uncached"))
    probes = []
    for what, prompt, reference_output in (("a new question", novel, uncached[0]), ("the first request again", first, batched)):
        # the new question's reference: itself computed without the cache; the first request's: its batched answer
        out = ask(prompt)
        media = [r for ranges in adapter.apply_processor(handle.processor, prompt, {modality: data})["placeholders"].values()
                 for r in ranges]
        cached = out[0].num_cached_tokens or 0
        probes.append(Probe(what, cached, _where(cached, media),
                            goldens.within_noise([reference_output], goldens.from_outputs(out), tolerance)))
    measured.proof = {"cached_tokens": [p.cached for p in probes], "hit_ends": [p.where for p in probes]}
    # a probe served nothing from the cache did not run the cache's path: what it answers is not its finding
    measured.problems += [f"{p.what} with {p.cached} cached tokens (the hit ends {p.where}): "
                          f"{q.replace('request 0', 'answer')} (against the same request answered without a cache hit)"
                          for p in probes if p.cached for q in p.problems]
    if "inside media" not in {p.where for p in probes}:
        shown = f"cached tokens {measured.proof['cached_tokens']}, hits end {measured.proof['hit_ends']}"
        if probes[0].where in ("nothing cached", "before media"):
            why = "the new question changes the prompt before its media (the question comes first in this template)"
        else:
            config = getattr(getattr(handle.llm, "llm_engine", None), "vllm_config", None)
            block = config.cache_config.block_size if config else PREFIX_BLOCK
            why = f"no {block}-token block boundary falls inside the placeholder ranges {media} before the questions part"
        measured.not_exercised = f"no cached prefix ended inside an image ({shown}): {why}"


def _where(cached: int, media: list[tuple[int, int]]) -> str:
    if cached == 0:
        return "nothing cached"
    if any(off < cached < off + n for off, n in media):
        return "inside media"
    if any(cached >= off + n for off, n in media):
        return "after media"
    return "before media"
