"""The engine facts of one family-config as one report cell (`cpu_engine` on vLLM's CPU build,
`engine` on GPUs): what `vlcheck diff` compares between the two ends of an upgrade, measured on one
live engine. It holds facts, no verdict: whether a fact is right is the engine tests' rule, each
test its own cell (`runners/engine_cells.py`), so no pass rule is written twice. Its status is
pass once measured, error where vlcheck could not measure, fail where vLLM refused a request.

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
    frames: list[dict] = []  # where vLLM raised, where it refused the cache resend

    runs = g.generation_runs(spec, variant, handle)
    facts["prompt_tokens"] = {r.shape: r.prompt_tokens for r in runs}
    facts["greedy_tokens"] = {r.shape: [o["token_ids"] for o in r.outputs] for r in runs}
    facts["finish_reasons"] = {r.shape: sorted(set(r.finish_reasons)) for r in runs}
    stop = g.stop_run(spec, variant, handle)
    if stop is not None:
        facts["stop_token_ends"] = stop.finish_reason == "stop" and stop.stop_reason == stop.stop_id

    stored = goldens.load(goldens.golden_path(handle.label, config_id(spec, variant), handle.platform))
    if stored is None:
        facts["golden"] = "none recorded"
    else:
        now = goldens.environment(handle.dtype, handle.model_dir)
        compared = goldens.compare_shapes(stored, {r.shape: r.outputs for r in runs}, now)
        facts["golden"] = [f"{shape}: {p} (tolerance {rule})" for shape, (rule, found) in compared.items()
                           for p in found] or "match"
    if handle.weights == "seeded":
        _against_transformers(spec, variant, handle, facts)
    _cache(spec, variant, handle, facts, frames)
    return CheckResult(spec.name, name, Status.PASS, f"[{kind}] {len(runs)} shape(s): facts recorded (the engine "
                       "tests' own cells hold the verdicts)", data={f"{kind}.{k}": v for k, v in facts.items()},
                       frames=frames)


def _against_transformers(spec: FamilySpec, variant: Variant, handle, facts: dict) -> None:
    """vLLM against the stored transformers reference (float32; the first-step tolerance only where
    the engine ran float32 too), and whether the output sees the media."""
    stored = reference.load(config_id(spec, variant))
    if stored is None:
        facts["transformers"] = "no reference recorded"
        return
    requests = reference.requests(spec, variant)
    actual = [reference.vllm_first_step(handle.llm, r) for r in requests]
    facts["transformers_agreement"] = {run["shape"]: "differ" if reference.disagreement(run, a, handle.dtype) else "agree"
                                       for run, a in zip(stored["runs"], actual)}
    facts["transformers_max_nats"] = {run["shape"]: _max_distance(run["top_logprobs"][0], a["top_logprobs"][0])
                                      for run, a in zip(stored["runs"], actual)}
    facts["first_step_logprobs"] = {run["shape"]: a["top_logprobs"][0] for run, a in zip(stored["runs"], actual)}
    moved_by = {}
    for r in requests:
        first = reference.vllm_first_step(handle.llm, r, new_tokens=1)["top_logprobs"][0]
        other = reference.vllm_first_step(handle.llm, r, r.other_items, new_tokens=1)["top_logprobs"][0]
        moved_by[r.shape] = reference.top_change(first, other)
    facts["sees_media"] = {shape: moved >= reference.SENSITIVITY_MIN for shape, moved in moved_by.items()}
    facts["media_change_nats"] = moved_by


def _max_distance(a: dict[str, float], b: dict[str, float]) -> float | None:
    shared = set(a) & set(b)
    return round(max(abs(a[t] - b[t]) for t in shared), 4) if shared else None


def _cache(spec: FamilySpec, variant: Variant, handle, facts: dict, frames: list[dict]) -> None:
    """The resend's cache hits; where vLLM refused the resend, what it said and where it raised."""
    try:
        run = g.uuid_resend(spec, variant, handle, "list", "report")
    except Exception as err:  # noqa: BLE001 - vLLM rejecting the resend is a fact of this engine
        found = from_exception(spec.name, "cache", err)
        if found.status is Status.ERROR:
            raise
        frames += found.frames
        facts["cache_resend"] = f"refused: {found.reason}"
        return
    facts["cache_resend_hits"] = run.hits_added
    facts["cache_resend_prompt_tokens_kept"] = run.resend_prompt_tokens == run.first_prompt_tokens
