"""Every family-config of the selected specs through vlcheck's checks: `pytest -m "not gpu"` runs
the catalogue's CPU checks (engine args, architecture, template, stops, vLLM's processor, its
tensors, placement, hostile inputs, the transformers reference, the served path), `pytest -m gpu`
serves it on a GPU (the example's requests, prompt token counts, stop tokens, the processor cache).
Declared deviations and skips work as in `vlcheck check`; a failure names family, variant, check."""

import pytest

from vlcheck.gate.checks import CATALOGUE
from vlcheck.runners.testing import assert_as_declared, expect_deviation, run_check
from vlcheck.engine.runs import NUM_PROMPTS, generation_runs, stop_run, unknown_uuid_error, uuid_resend

PER_CONFIG = [c for c in CATALOGUE.values() if c.run is not None]
"""The catalogue's checks that run per family-config (`spec` compares a whole family with its example)."""


@pytest.mark.parametrize("check", PER_CONFIG, ids=lambda c: c.name)
def test_cpu_check(family, variant, check, request):
    result = run_check(request, check.name, family, variant)  # skips with the reason; None: as in --vlcheck-baseline
    if result is not None:
        assert_as_declared(result, variant, check.declared_as)


@pytest.mark.gpu
def test_requests_complete_with_processor_token_counts(family, variant, engine):
    for run in generation_runs(family, variant, engine):
        assert all(r in ("stop", "length") for r in run.finish_reasons), f"{family.name} {run.shape}: {run.finish_reasons}"
        assert run.prompt_tokens == run.expected_prompt_tokens, (
            f"{family.name} [{variant.kind}] generation {run.shape}: the engine saw {run.prompt_tokens} prompt tokens, "
            f"vLLM's processor on CPU gives {run.expected_prompt_tokens}")


@pytest.mark.gpu
def test_stop_token_ends_generation(family, variant, engine):
    run = stop_run(family, variant, engine)
    if run is None:
        pytest.skip(f"{family.name}: fewer than 3 tokens generated; no stop token to try")
    assert run.finish_reason == "stop" and run.stop_reason == run.stop_id, (run.finish_reason, run.stop_reason)


@pytest.mark.gpu
def test_cache_resend_hits_and_unknown_uuid_misses(family, variant, engine, request):
    expect_deviation(request, variant, "cache")
    run = uuid_resend(family, variant, engine, "list", "tier")
    assert run.hits_added == NUM_PROMPTS and run.resend_prompt_tokens == run.first_prompt_tokens, (
        f"{family.name} [{variant.kind}] cache: resend with [None] + uuids: {run.hits_added} hits for {NUM_PROMPTS} "
        f"items, prompt tokens {run.first_prompt_tokens} -> {run.resend_prompt_tokens}")
    error = unknown_uuid_error(family, variant, engine)
    assert error is not None and "Cache miss" in error, f"unknown uuid with empty media: expected a cache miss, got {error!r}"
