"""Every family-config of the selected specs through vlcheck's checks: `pytest -m "not gpu"` runs
the CPU checks (engine args, architecture, template, stops, vLLM's processor), `pytest -m gpu`
serves it on a GPU (the example's requests, prompt token counts, stop tokens, the processor cache).
Declared deviations and skips work as in `vlcheck check`; a failure names family, variant, check."""

import pytest

from vlcheck.core.results import Status, declared_deviation
from vlcheck.cpu.processor_check import processor_check
from vlcheck.cpu.vllm_checks import architecture_check, engine_args_check
from vlcheck.gate.testing import assert_as_declared, expect_deviation, headline
from vlcheck.gpu.gpu_checks import NUM_PROMPTS, generation_runs, stop_run, unknown_uuid_error, uuid_resend
from vlcheck.prompt.conformance import stop_conformance, template_conformance

CPU_CHECKS = {"engine_args": engine_args_check, "architecture": architecture_check, "template": template_conformance,
              "stops": stop_conformance, "processor": processor_check}


@pytest.mark.parametrize("check", list(CPU_CHECKS))
def test_cpu_check(family, variant, check):
    result = declared_deviation(CPU_CHECKS[check](family, variant), variant)
    if result.status is Status.SKIP:
        pytest.skip(headline(result, variant))
    assert_as_declared(result, variant)


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
