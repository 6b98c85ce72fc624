"""Runs on a live engine (GPU or the CPU build): generation, stops, goldens, processor-cache behaviour.

Each function measures and returns facts; the tests (and `vlcheck check --gpu`) decide. Token
counts and cache counters are the evidence, never output equality alone: with synthetic or dummy
weights, outputs hardly depend on the input.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any

from vlcheck import adapter
from vlcheck.engine import goldens, noise
from vlcheck.engine.engines import EngineHandle, cache_counters
from vlcheck.prompt.render import NUM_PROMPTS, request_prompts
from vlcheck.prompt.requests import build, example_prompts, media_data
from vlcheck.spec.schema import FamilySpec, Variant


def greedy(**kwargs):
    from vllm import SamplingParams

    return SamplingParams(**{"temperature": 0.0, "max_tokens": 8, "logprobs": 5, **kwargs})


@dataclass
class ShapeRun:
    shape: str
    prompt_tokens: list[int]
    expected_prompt_tokens: list[int]
    finish_reasons: list[str]
    outputs: list[dict]


def run_shape(spec: FamilySpec, variant: Variant, handle: EngineHandle, modality: str, count: int,
              alone: bool = False, salt: str | None = None, uuid_tag: str | None = None) -> ShapeRun:
    """The example's requests for one shape (--num-prompts 4, a different prompt per request),
    and the prompt token counts vLLM's CPU processor gives for the same inputs. `alone`: each
    request in a batch of its own, never served from the prefix cache (measures batch noise).
    `salt`: batched, but never served from blocks cached by a run with another salt (or none).
    `uuid_tag`: the media named by new uuids, so that neither the processor cache, the encoder cache
    nor the prefix cache (whose block hashes hold the media's) serves a result computed before."""
    prompts = request_prompts(example_prompts(spec, variant, modality, count), NUM_PROMPTS, True)
    data = media_data(variant, modality, count)
    inputs = [{"prompt": p, "multi_modal_data": {modality: data}, **({"cache_salt": salt} if salt else {}),
               **({"multi_modal_uuids": {modality: [f"{uuid_tag}-{modality}{count}-{i}-{k}" for k in range(count)]}} if uuid_tag else {})}
              for i, p in enumerate(prompts)]
    if alone:
        outs = [handle.llm.generate([{**one, "cache_salt": f"{salt or 'alone'}-{i}"}], greedy(), use_tqdm=False)[0]
                for i, one in enumerate(inputs)]
    else:
        outs = handle.llm.generate(inputs, greedy(), use_tqdm=False)
    expected = [len(adapter.apply_processor(handle.processor, p, {modality: data})["prompt_token_ids"]) for p in prompts]
    return ShapeRun(f"{modality} x{count}", [len(o.prompt_token_ids) for o in outs], expected,
                    [o.outputs[0].finish_reason for o in outs], goldens.from_outputs(outs))


@dataclass
class TilingRun:
    label: str
    prompt_tokens: int | None
    """What the engine saw; None where the request was not sent (`not_sent`)."""
    expected_prompt_tokens: int
    finish_reason: str | None = None
    not_sent: str = ""


def tiling_runs(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> list[TilingRun]:
    """The `tiling` check's requests (`cpu/tiling.py`: images past every family's tile and resolution
    bounds), each alone through the engine, with the prompt token count vLLM's CPU processor gives. A
    request longer than the engine's max_model_len is not sent, and says so."""
    from vlcheck.cpu.tiling import tiling_requests

    limit = handle.processor.info.ctx.model_config.max_model_len
    runs = []
    for i, request in enumerate(tiling_requests(spec, variant)):
        expected = len(adapter.apply_processor(handle.processor, request.prompt, request.mm_data)["prompt_token_ids"])
        if expected + 2 > limit:
            runs.append(TilingRun(request.label, None, expected,
                                  not_sent=f"{expected} prompt tokens + 2 to generate > max_model_len {limit}"))
            continue
        out = handle.llm.generate([{"prompt": request.prompt, "multi_modal_data": request.mm_data,
                                    "cache_salt": f"vlcheck-tiling-{i}"}], greedy(max_tokens=2), use_tqdm=False)[0]
        runs.append(TilingRun(request.label, len(out.prompt_token_ids), expected, out.outputs[0].finish_reason))
    return runs


SPEED_ROUNDS = 5
"""Timed rounds after one untimed round (the engine's first requests of a shape compile and allocate)."""
DECODE_TOKENS = 32
SPEED_MEDIA = 8000
"""Media contents of the timed requests (`media_data(offset=...)`): a new item each request, apart from
every other test's, so the processor, encoder and prefix caches all miss, as a new user's request does."""


@dataclass
class EngineSpeed:
    """One family-config's engine: seconds to the first token of the example's request (one item of
    its primary modality, nothing cached) as the client waits for it, and seconds per decoded token."""

    ttft_s: list[float]
    decode_s_per_token: list[float]
    decode_clock: str
    """`engine core`: the decode request's own first- and last-token timestamps (`RequestOutput.metrics`,
    where the engine keeps stats); `client`: its wall time less the round's time to first token (a
    loaded machine makes single rounds of this meaningless: the median still holds)."""
    prompt_tokens: int
    machine: dict

    def facts(self) -> dict[str, Any]:
        import math
        import statistics

        def band(samples: list[float], scale: float) -> dict[str, Any]:
            logs = [math.log(x) for x in samples]
            return {"median": round(statistics.median(samples) * scale, 3),
                    "spread": round(statistics.stdev(logs), 4) if len(logs) > 1 else None,
                    "samples": [round(x * scale, 3) for x in samples]}

        return {"ttft_ms": band(self.ttft_s, 1000.0),
                "decode_ms_per_token": band(self.decode_s_per_token, 1000.0),
                "decode_tokens_per_s": round(1.0 / statistics.median(self.decode_s_per_token), 1),
                "decode_clock": self.decode_clock, "prompt_tokens": self.prompt_tokens,
                "rounds": len(self.ttft_s), "machine": self.machine}


def engine_speed(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> EngineSpeed:
    """Each round: the example's request for one token (time to first token, the client's wall time),
    then another with new media for 1 + DECODE_TOKENS tokens with EOS ignored, whose decode time per
    token is read from the engine core's own timestamps where it keeps them (else its wall time less
    the round's first-token time). Each request runs alone (a batch of one: what it shares would
    otherwise depend on timing). Raises AssertionError where a request did not produce the tokens
    asked: a timing of a shorter answer is no timing of decoding."""
    from vlcheck.core.devices import machine

    modality = variant.primary_modality
    prompt = example_prompts(spec, variant, modality, 1)[0]
    ttft, per_token, clocks, prompt_tokens = [], [], set(), 0

    def timed(offset: int, tokens: int):
        one = {"prompt": prompt, "multi_modal_data": {modality: media_data(variant, modality, 1, offset=offset)},
               "cache_salt": f"vlcheck-speed-{offset}"}
        start = time.perf_counter()
        out = handle.llm.generate([one], greedy(max_tokens=tokens, logprobs=None, ignore_eos=True), use_tqdm=False)[0]
        took = time.perf_counter() - start
        produced = len(out.outputs[0].token_ids)
        assert produced == tokens, f"{spec.name}: asked for {tokens} token(s) with EOS ignored, got {produced}"
        return took, out

    for r in range(SPEED_ROUNDS + 1):
        first, out = timed(SPEED_MEDIA + 2 * r, 1)
        prompt_tokens = len(out.prompt_token_ids)
        whole, out = timed(SPEED_MEDIA + 2 * r + 1, 1 + DECODE_TOKENS)
        stats = getattr(out, "metrics", None)
        decoding = (getattr(stats, "last_token_ts", 0.0) or 0.0) - (getattr(stats, "first_token_ts", 0.0) or 0.0)
        clock = "engine core" if decoding > 0 else "client"
        if r:
            ttft.append(first)
            per_token.append((decoding if decoding > 0 else max(whole - first, 1e-6)) / DECODE_TOKENS)
            clocks.add(clock)
    return EngineSpeed(ttft, per_token, " and ".join(sorted(clocks)), prompt_tokens, machine())


def generation_runs(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> list[ShapeRun]:
    """Every modality and item count, run once per engine (greedy: the tests that read them share them).
    Where the engine core runs in another process, each request runs alone: that core schedules a
    request as soon as it arrives, while `LLM.generate` is still processing the next one's media, so
    the batches a request shares depend on timing. On an H100 running 16 family-configs side by side,
    qwen2_5_vl's second image request joined the decode batch otherwise than when its golden was
    recorded, and its second token moved 0.0022 nats, beyond 3 x the noise measured (0.00038). A
    batch of one is the only batch timing cannot change; what batching moves is measured as the
    golden's `alone` noise."""
    if handle.generation_runs is None:
        handle.generation_runs = [run_shape(spec, variant, handle, m, c, alone=handle.runs_alone)
                                  for m in variant.modalities for c in variant.item_counts()]
    return handle.generation_runs


def batch_dependence(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> dict[str, float]:
    """Per shape: how far batching the requests moves them from `generation_runs` run one request
    per batch (an fp8 engine's fact: its dynamic activation scales see the whole batch)."""
    alone = {r.shape: r.outputs for r in generation_runs(spec, variant, handle)}
    batched = [run_shape(spec, variant, handle, m, c, salt="vlcheck-batched")
               for m in variant.modalities for c in variant.item_counts()]
    return {r.shape: goldens.largest_difference(alone[r.shape], r.outputs) for r in batched}


def batch_noise(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> dict[str, float]:
    """Per shape: how far the requests' logprobs move between running each alone and running them
    batched (`goldens.largest_difference`): the noise another batch shape, so other kernels, brings.
    The generation runs are one of the two (`handle.runs_alone`); the other is run here."""
    runs = {r.shape: r.outputs for r in generation_runs(spec, variant, handle)}
    other = [run_shape(spec, variant, handle, m, c, alone=not handle.runs_alone, salt="vlcheck-batched")
             for m in variant.modalities for c in variant.item_counts()]
    return {r.shape: goldens.largest_difference(runs[r.shape], r.outputs) for r in other}


def measured_noise(spec: FamilySpec, variant: Variant, handle: EngineHandle,
                   golden: goldens.Golden | None = None) -> dict[str, dict[str, float]]:
    """This engine's noise per kind and shape (`engine/noise.py`): each request alone, the same
    batch again (another cache salt: computed, not served from the prefix cache), and, for a golden
    recorded on another GPU, the golden against this run. An engine that runs one request per
    batch (`one_request_per_batch`) measures the repeat only: its goldens are never batched."""
    batched = {r.shape: r.outputs for r in generation_runs(spec, variant, handle)}
    again = [run_shape(spec, variant, handle, m, c, alone=handle.runs_alone, salt="vlcheck-repeat")
             for m in variant.modalities for c in variant.item_counts()]
    found = {"repeat": {r.shape: goldens.largest_difference(batched[r.shape], r.outputs) for r in again}}
    if not handle.one_request_per_batch:  # there, batching is what the goldens leave out on purpose
        found["alone"] = batch_noise(spec, variant, handle)
    here = goldens.environment(handle.dtype)["gpu"]
    if golden is not None and golden.recorded_on and golden.recorded_on.get("gpu") != here:
        found["against_golden"] = {shape: goldens.largest_difference(golden.outputs[shape], out)
                                   for shape, out in batched.items() if shape in golden.outputs}
    return found


def record_golden(spec: FamilySpec, variant: Variant, handle: EngineHandle, path, outputs: dict[str, list[dict]],
                  **extra) -> goldens.Golden:
    """`outputs` saved as the golden at `path`, with this engine's noise and a configuration's `extra`."""
    now = goldens.environment(handle.dtype, handle.model_dir)
    goldens.save(path, outputs, now, noise.merged(None, now["gpu"], now, measured_noise(spec, variant, handle)), **extra)
    return goldens.load(path)


def remeasured_noise(spec: FamilySpec, variant: Variant, handle: EngineHandle, path,
                     stored: goldens.Golden) -> goldens.Golden:
    """The golden at `path` with this GPU's noise measured and stored beside its earlier
    measurements; raises ValueError where this run's versions are not the golden's (`noise.can_measure`)."""
    now = goldens.environment(handle.dtype, handle.model_dir)
    why_not = noise.can_measure(stored.recorded_on, now)
    if why_not:
        raise ValueError(why_not)
    measured = measured_noise(spec, variant, handle, stored)
    latest = _unchanged_since(path, stored)
    goldens.save(path, latest.outputs, latest.recorded_on, noise.merged(latest.noise, now["gpu"], latest.recorded_on, measured),
                 **latest.extra)
    return goldens.load(path)


def _unchanged_since(path, stored: goldens.Golden) -> goldens.Golden:
    """The golden at `path` as it is now, read again just before a measurement is added to it:
    a configuration's process beside this one may have added its own since `stored` was read."""
    latest = goldens.load(path)
    if latest is None or latest.outputs != stored.outputs or latest.recorded_on != stored.recorded_on:
        raise ValueError(f"{path} was re-recorded while its noise was measured: measure again")
    return latest


def with_configuration_distance(handle: EngineHandle, path, stored: goldens.Golden, name: str,
                                actual: dict[str, list[dict]], reference: dict[str, list[dict]], dtype: str,
                                ceiling: float = noise.CONFIGURATION_CEILING) -> goldens.Golden:
    """The eager golden at `path` with configuration `name`'s distance to `reference` (the eager
    engine's outputs of this run, in `dtype`) stored as that configuration's noise on this GPU;
    raises ValueError where it cannot be noise (other versions than the golden's, other tokens
    where no near-tie was, or over `ceiling`)."""
    now = goldens.environment(dtype, handle.model_dir)
    why_not = noise.can_measure(stored.recorded_on, now)
    distance = {shape: goldens.largest_difference(reference.get(shape, []), out) for shape, out in actual.items()}
    not_ties = [shape for shape, out in actual.items()
                if goldens.within_noise(reference.get(shape, []), out, noise.scaled(distance[shape]))]
    why_not = why_not or noise.configuration_distance_refused(name, distance, not_ties, ceiling)
    if why_not:
        raise ValueError(why_not)
    latest = _unchanged_since(path, stored)
    goldens.save(path, latest.outputs, latest.recorded_on,
                 noise.with_configuration(latest.noise, now["gpu"], latest.recorded_on, name, distance), **latest.extra)
    return goldens.load(path)


@dataclass
class StopRun:
    stop_id: int
    first_tokens: list[int]
    stopped_tokens: list[int]
    finish_reason: str
    stop_reason: Any


def stop_run(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> StopRun | None:
    """Greedy once; then again with the third generated token as a stop id: generation must end
    there with finish_reason "stop" and that stop_reason."""
    modality = variant.primary_modality
    request = {"prompt": example_prompts(spec, variant, modality)[0],
               "multi_modal_data": {modality: media_data(variant, modality, 1)}}
    first = handle.llm.generate([request], greedy(max_tokens=6, ignore_eos=True), use_tqdm=False)[0].outputs[0]
    ids = list(first.token_ids)
    if len(ids) < 3:
        return None
    stop_id = ids[2]
    second = handle.llm.generate([request], greedy(max_tokens=6, ignore_eos=True, stop_token_ids=[stop_id]),
                                 use_tqdm=False)[0].outputs[0]
    return StopRun(stop_id, ids, list(second.token_ids), second.finish_reason, second.stop_reason)


@dataclass
class CacheRun:
    first_prompt_tokens: list[int]
    resend_prompt_tokens: list[int]
    hits_added: float
    queries_added: float
    first_outputs: list[dict]
    resend_outputs: list[dict]
    """Token ids and top-5 logprobs (goldens.from_outputs): the resend is compared by vLLM's
    check_logprobs_close rule, as batch composition moves bfloat16 logits (llava-onevision on an
    H200, seeded weights: equal for 7 tokens, then a near-tie broke the other way)."""


def uuid_resend(spec: FamilySpec, variant: Variant, handle: EngineHandle, form: str, tag: str) -> CacheRun:
    """The example's flow: N requests with media and uuids, then the same with empty media and
    the same uuids, in `form` "list" (`[None]`, works) or "none" (`None`, the example's)."""
    modality = variant.primary_modality
    prompts = example_prompts(spec, variant, modality)
    requests = build(prompts, modality, media_data(variant, modality, 1, offset=zlib.crc32(tag.encode()) % 1000), NUM_PROMPTS,
                     different_prompts=True, uuid_prefix=f"{spec.name}-{variant.kind}-{tag}")
    llm = handle.llm
    first = llm.generate(requests.inputs, greedy(), use_tqdm=False)
    before = cache_counters(llm)
    second = llm.generate(requests.resend if form == "list" else requests.resend_none, greedy(), use_tqdm=False)
    after = cache_counters(llm)
    return CacheRun([len(o.prompt_token_ids) for o in first], [len(o.prompt_token_ids) for o in second],
                    after["hits"] - before["hits"], after["queries"] - before["queries"],
                    goldens.from_outputs(first), goldens.from_outputs(second))


def unknown_uuid_error(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> str | None:
    """Empty media with a uuid the cache never saw: vLLM's error text, or None if it accepted it."""
    modality = variant.primary_modality
    request = {"prompt": example_prompts(spec, variant, modality)[0], "multi_modal_data": {modality: [None]},
               "multi_modal_uuids": {modality: [f"{spec.name}-never-sent"]}}
    try:
        handle.llm.generate([request], greedy(), use_tqdm=False)
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None


def still_serves(spec: FamilySpec, variant: Variant, handle: EngineHandle) -> bool:
    """After a rejected request the same engine must still answer a normal one."""
    modality = variant.primary_modality
    request = {"prompt": example_prompts(spec, variant, modality)[0],
               "multi_modal_data": {modality: media_data(variant, modality, 1)}}
    out = handle.llm.generate([request], greedy(max_tokens=2), use_tqdm=False)
    return len(out) == 1 and out[0].outputs[0].finish_reason in ("stop", "length")


@dataclass
class RepeatRun:
    num_prompts: int
    distinct_items: int
    hits_added: float
    queries_added: float
    seconds: float


def repeat_simulation(spec: FamilySpec, variant: Variant, handle: EngineHandle, repeat_prob: float,
                      with_uuids: bool, num_prompts: int = 8, seed: int = 0, tag: str = "repeat") -> RepeatRun:
    """The example's `--image-repeat-prob`: each request reuses the previous image with the given
    probability, else gets a one-pixel-changed copy (a guaranteed miss)."""
    modality = "image"
    prompts = example_prompts(spec, variant, modality)
    base = media_data(variant, modality, 1, offset=500 + zlib.crc32(tag.encode()) % 400)
    requests = build(prompts, modality, base, num_prompts, repeat_prob=repeat_prob, seed=seed,
                     with_uuids=with_uuids, uuid_prefix=f"{spec.name}-{tag}")
    before = cache_counters(handle.llm)
    start = time.perf_counter()
    handle.llm.generate(requests.inputs, greedy(max_tokens=4), use_tqdm=False)
    seconds = time.perf_counter() - start
    after = cache_counters(handle.llm)
    return RepeatRun(num_prompts, requests.distinct_items, after["hits"] - before["hits"],
                     after["queries"] - before["queries"], seconds)


@dataclass
class PlantedRun:
    module: str | None
    """The projector module scaled (None: the model has none by `adapter.engine.PROJECTOR_NAMES`)."""
    outputs: dict[str, list[dict]]


def projector_scaled(spec: FamilySpec, variant: Variant, handle: EngineHandle, factor: float) -> PlantedRun:
    """The example's requests again with the projector's output times `factor` in the running engine
    (the size of change a release that touches a projector makes), on media named by new uuids so
    that no cache serves the unchanged result; the engine is restored after."""
    from vlcheck.adapter.engine import restored_projector, scaled_projector

    module = scaled_projector(handle.llm, factor)[0]
    try:
        if module is None:
            return PlantedRun(None, {})
        runs = [run_shape(spec, variant, handle, m, c, uuid_tag=f"projector-x{factor}")
                for m in variant.modalities for c in variant.item_counts()]
    finally:
        restored_projector(handle.llm)
    return PlantedRun(module, {r.shape: r.outputs for r in runs})
