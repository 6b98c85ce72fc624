"""Real vLLM generation per family-config: the example's requests complete, prompt token counts
equal the CPU processor's, stop tokens end generation, greedy outputs match the goldens."""

import pytest

from vlcheck.gate.testing import expect_deviation
from vlcheck.gpu import goldens
from vlcheck.gpu.gpu_checks import generation_runs, stop_run
from vlcheck.spec.schema import config_id

pytestmark = pytest.mark.engine  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): conftest.py


def test_requests_complete_with_processor_token_counts(family, variant, engine, request):
    runs = generation_runs(family, variant, engine)
    for run in runs:
        assert all(r in ("stop", "length") for r in run.finish_reasons), f"{family.name} {run.shape}: {run.finish_reasons}"
        assert run.prompt_tokens == run.expected_prompt_tokens, (
            f"{family.name} {run.shape}: engine saw {run.prompt_tokens} prompt tokens, "
            f"the CPU processor gives {run.expected_prompt_tokens}")
    request.node.user_properties.append(("engine_start_s", round(engine.start_seconds, 1)))
    request.node.user_properties.append(("weights", engine.weights))
    request.node.user_properties.append(("shapes", {r.shape: r.prompt_tokens for r in runs}))


def test_greedy_outputs_match_golden(family, variant, engine, request):
    """Token ids and top-5 logprobs, compared with logprob-closeness. A declared `golden`
    deviation (dummy weights give outputs that cannot be a golden, e.g. NaN) makes this a strict
    expected failure on vLLM's dummy weights."""
    if engine.weights == "synthetic-dummy":
        expect_deviation(request, variant, "golden")
    actual = {r.shape: r.outputs for r in generation_runs(family, variant, engine)}
    unusable = [f"{shape}: {p}" for shape in actual for p in goldens.unusable(actual[shape])]
    assert not unusable, "the outputs cannot be a golden:\n" + "\n".join(unusable)
    path = goldens.golden_path(engine.weights, config_id(family, variant), engine.platform)
    if request.config.getoption("--vlcheck-update-goldens"):
        goldens.save(path, actual)
        return
    stored = goldens.load(path)
    if stored is None:
        pytest.fail(f"no golden {path.relative_to(goldens.GOLDEN_ROOT.parent.parent)}: record it with "
                    "--vlcheck-update-goldens and review it", pytrace=False)
    assert set(actual) == set(stored), f"request shapes {sorted(actual)}, golden has {sorted(stored)}"
    tolerance = goldens.logprob_tolerance(engine.platform)
    problems = [f"{shape}: {p}" for shape in actual for p in goldens.compare(stored[shape], actual[shape], tolerance)]
    assert not problems, "\n".join(problems)


def test_stop_token_ends_generation(family, variant, engine):
    run = stop_run(family, variant, engine)
    if run is None:
        pytest.skip(f"{family.name}: fewer than 3 tokens generated; no stop token to try")
    k = run.first_tokens.index(run.stop_id)
    assert run.finish_reason == "stop" and run.stop_reason == run.stop_id, (run.finish_reason, run.stop_reason)
    assert run.stopped_tokens[:k] == run.first_tokens[:k] and len(run.stopped_tokens) <= k + 1
