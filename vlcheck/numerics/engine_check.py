"""The engine tier as one report cell per family-config (`vlcheck check --cpu-engine`): what the
engine tests assert, measured on one live engine, with the facts `vlcheck diff` compares between
the two ends of an upgrade.

Compared facts are the ones that move only when behaviour moves: prompt token counts, greedy
token ids, whether the outputs still match the goldens (logprobs included, on the CPU build),
whether vLLM agrees with the transformers reference, whether the output sees its media, cache
hits. The raw numbers (first-step logprobs, their distance from transformers', the engine's
start time) are recorded for people (`INFORMATIONAL`): float noise there is not a change.
"""

from __future__ import annotations

from vlcheck.core.results import CheckResult, Status, from_exception
from vlcheck.engine import goldens
from vlcheck.engine import runs as g
from vlcheck.numerics import reference
from vlcheck.spec.schema import FamilySpec, Variant, config_id

INFORMATIONAL = ("engine_start_s", "weights", "first_step_logprobs", "transformers_max_nats", "media_change_nats")


def engine_check(spec: FamilySpec, variant: Variant, handle) -> CheckResult:
    """The cell of one family-config; a request vLLM rejects fails it, vlcheck's own crash is an error."""
    name = "cpu_engine" if handle.platform == "cpu" else "engine"
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        return _measure(spec, variant, handle, name)
    except TemplateUnavailable as err:  # the example's prompt needs a Hub file this cache lacks
        return CheckResult(spec.name, name, Status.SKIP, f"[{variant.kind}] {err}")
    except Exception as err:  # noqa: BLE001 - who raised it decides fail or error (core.results.raised_by)
        return from_exception(spec.name, name, err, f"[{variant.kind}]")


def _measure(spec: FamilySpec, variant: Variant, handle, name: str) -> CheckResult:
    kind = variant.kind
    facts: dict = {"engine_start_s": round(handle.start_seconds, 1), "weights": handle.weights}
    problems: list[str] = []
    frames: list[dict] = []  # where the exception behind a problem was raised (the cache resend's)

    runs = g.generation_runs(spec, variant, handle)
    facts["prompt_tokens"] = {r.shape: r.prompt_tokens for r in runs}
    facts["greedy_tokens"] = {r.shape: [o["token_ids"] for o in r.outputs] for r in runs}
    problems += [f"{r.shape}: engine {r.prompt_tokens} prompt tokens, CPU processor {r.expected_prompt_tokens}"
                 for r in runs if r.prompt_tokens != r.expected_prompt_tokens]
    problems += [f"{r.shape}: finish reasons {r.finish_reasons}" for r in runs
                 if not all(f in ("stop", "length") for f in r.finish_reasons)]
    stop = g.stop_run(spec, variant, handle)
    if stop is not None and (stop.finish_reason != "stop" or stop.stop_reason != stop.stop_id):
        problems.append(f"stop token {stop.stop_id} did not end generation ({stop.finish_reason}, {stop.stop_reason})")

    stored = goldens.load(goldens.golden_path(handle.label, config_id(spec, variant), handle.platform))
    if stored is None:
        facts["golden"] = "none recorded"
    else:
        now = goldens.environment(handle.dtype, handle.model_dir)
        compared = goldens.compare_shapes(stored, {r.shape: r.outputs for r in runs}, now)
        moved = [f"{shape}: {p} (tolerance {rule})" for shape, (rule, found) in compared.items() for p in found]
        if moved and (hint := goldens.other_checkpoint(stored.recorded_on, now)):
            moved.append(hint)
        facts["golden"] = moved or "match"
        problems += moved

    declared: dict[str, list[str]] = {}  # a declaration covers only the part it names
    if handle.weights == "seeded":
        agreement, declared["vllm_reference"] = _against_transformers(spec, variant, handle, facts)
        problems += agreement
    cache = _cache(spec, variant, handle, facts, frames)
    if variant.deviation("cache") is not None:
        declared["cache"] = cache
    else:
        problems += cache

    data = {f"{kind}.{k}": v for k, v in facts.items()}
    if problems:
        return CheckResult(spec.name, name, Status.FAIL, f"[{kind}] {problems[0]}", problems, data, frames=frames)
    happened = [key for key, found in declared.items() if found]
    if happened:
        details = [p for key in happened for p in declared[key]]
        return CheckResult(spec.name, name, Status.DEVIATION, f"[{kind}] {variant.deviation(happened[0]).reason}",
                           details, data, details[0], frames=frames)
    idle = [key for key in declared if variant.deviation(key) is not None]
    note = "".join(f" (deviations.{key} is declared for {variant.deviation(key).scope} but did not happen)" for key in idle)
    return CheckResult(spec.name, name, Status.PASS, f"[{kind}] {len(runs)} shape(s): token counts, stops, goldens, "
                       f"transformers and cache as expected{note}", data=data)


def _against_transformers(spec: FamilySpec, variant: Variant, handle, facts: dict) -> tuple[list[str], list[str]]:
    """(problems, declared problems): vLLM against the stored transformers reference (float32; the
    first-step tolerance only where the engine ran float32 too), and whether the output sees the
    media. A declared `vllm_reference` deviation covers the disagreement with transformers only."""
    stored = reference.load(config_id(spec, variant))
    if stored is None:
        facts["transformers"] = "no reference recorded"
        return [], []
    requests = reference.requests(spec, variant)
    actual = [reference.vllm_first_step(handle.llm, r) for r in requests]
    agreement, problems, seen, moved_by = {}, [], {}, {}
    for run, a in zip(stored["runs"], actual):
        found = reference.disagreement(run, a, handle.dtype)
        agreement[run["shape"]] = "agree" if not found else "differ"
        problems += [f"{run['shape']}: vLLM vs transformers {stored['transformers']}: {p}" for p in found]
    facts["transformers_agreement"] = agreement
    facts["transformers_max_nats"] = {run["shape"]: _max_distance(run["top_logprobs"][0], a["top_logprobs"][0])
                                      for run, a in zip(stored["runs"], actual)}
    facts["first_step_logprobs"] = {run["shape"]: a["top_logprobs"][0] for run, a in zip(stored["runs"], actual)}
    for r in requests:
        first = reference.vllm_first_step(handle.llm, r, new_tokens=1)["top_logprobs"][0]
        other = reference.vllm_first_step(handle.llm, r, r.other_items, new_tokens=1)["top_logprobs"][0]
        moved_by[r.shape] = reference.top_change(first, other)
        seen[r.shape] = moved_by[r.shape] >= reference.SENSITIVITY_MIN
    facts["sees_media"], facts["media_change_nats"] = seen, moved_by
    blind = [f"{shape}: other media move the first-step top-5 logprobs by {moved_by[shape]} nats" for shape, ok in seen.items()
             if not ok]
    if variant.deviation("vllm_reference") is not None:
        return blind, problems
    return blind + problems, []


def _max_distance(a: dict[str, float], b: dict[str, float]) -> float | None:
    shared = set(a) & set(b)
    return round(max(abs(a[t] - b[t]) for t in shared), 4) if shared else None


def _cache(spec: FamilySpec, variant: Variant, handle, facts: dict, frames: list[dict] | None = None) -> list[str]:
    """The cache part's problems; where vLLM raised one, its frames are added to `frames`."""
    try:
        run = g.uuid_resend(spec, variant, handle, "list", "report")
    except Exception as err:  # noqa: BLE001 - vLLM rejecting the resend is this part's finding (or its declaration)
        found = from_exception(spec.name, "cache", err)
        if found.status is Status.ERROR:
            raise
        if frames is not None:
            frames += found.frames
        return [f"resend with [None] + uuids: {found.reason}"]
    facts["cache_resend_hits"] = run.hits_added
    if run.hits_added != g.NUM_PROMPTS or run.resend_prompt_tokens != run.first_prompt_tokens:
        return [f"resend with [None] + uuids: {run.hits_added} cache hits for {g.NUM_PROMPTS} items, prompt tokens "
                f"{run.first_prompt_tokens} -> {run.resend_prompt_tokens}"]
    return []
