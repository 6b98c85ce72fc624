"""Real vLLM generation per family-config: the example's requests complete, prompt token counts
equal the CPU processor's, stop tokens end generation, greedy outputs match the goldens."""

import os
from pathlib import Path

import pytest

from vlcheck.runners.testing import assert_as_scoped, modality_of
from vlcheck.engine import goldens
from vlcheck.engine.runs import batch_noise, generation_runs, stop_run
from vlcheck.spec.schema import config_id

pytestmark = pytest.mark.engine  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin


def test_requests_complete_with_processor_token_counts(family, variant, engine, request):
    runs = generation_runs(family, variant, engine)
    for run in runs:
        assert all(r in ("stop", "length") for r in run.finish_reasons), f"{family.name} {run.shape}: {run.finish_reasons}"
        assert run.prompt_tokens == run.expected_prompt_tokens, (
            f"{family.name} {run.shape}: engine saw {run.prompt_tokens} prompt tokens, "
            f"the CPU processor gives {run.expected_prompt_tokens}")
    request.node.user_properties.append(("weights", engine.weights))
    request.node.user_properties.append(("shapes", {r.shape: r.prompt_tokens for r in runs}))


def test_greedy_outputs_match_golden(family, variant, engine, request):
    """Token ids and top-5 logprobs within measured noise of the golden: `goldens.REPEAT_TOLERANCE`
    of one recorded on the same vLLM, torch and GPU, `goldens.NOISE_TOLERANCE` of one recorded
    elsewhere (vLLM's top-5-membership rule let a 1% vision-encoder change through). A declared `golden`
    deviation (dummy weights give outputs that cannot be a golden, e.g. NaN) covers vLLM's dummy
    weights only, and only its modalities."""
    actual = {r.shape: r.outputs for r in generation_runs(family, variant, engine)}
    problems = {modality_of(shape): [f"{shape}: {p}" for p in goldens.unusable(out)] for shape, out in actual.items()}
    path = goldens.golden_path(engine.label, config_id(family, variant), engine.platform)
    now = goldens.environment(engine.dtype, engine.model_dir)
    evidence = os.environ.get("VLCHECK_GOLDENS_SEEN")
    if evidence:  # what this run generated, for reading beside the golden (scripts/gpu-tier.sh keeps it)
        goldens.save(Path(evidence) / engine.label / path.name, actual, now)
    def assert_none(headline: str) -> None:
        if engine.weights == "synthetic-dummy":
            assert_as_scoped(request, variant, "golden", problems, headline)
        found = [p for ps in problems.values() for p in ps]
        assert not found, headline + "\n" + "\n".join(found)

    if request.config.getoption("--vlcheck-update-goldens"):
        assert_none("the outputs cannot be a golden:")
        goldens.save(path, actual, now)
        request.node.user_properties.append(("batch_noise", batch_noise(family, variant, engine)))
        return
    stored = goldens.load(path)
    if stored is None:
        pytest.fail(f"no golden {path.relative_to(goldens.GOLDEN_ROOT.parent.parent)}: record it with "
                    "--vlcheck-update-goldens and review it", pytrace=False)
    recorded_on, outputs = stored
    assert set(actual) == set(outputs), f"request shapes {sorted(actual)}, golden has {sorted(outputs)}"
    tolerance = goldens.tolerance_for(recorded_on, now)
    request.node.user_properties.append(("golden_rule", f"within {tolerance} nats"))
    for shape in actual:
        problems[modality_of(shape)] += [f"{shape}: {p}" for p in goldens.compare_golden(outputs[shape], actual[shape], tolerance)]
        request.node.user_properties.append((f"golden_distance {shape}", goldens.largest_difference(outputs[shape], actual[shape])))
    hint = goldens.other_checkpoint(recorded_on, now) if any(problems.values()) else None
    assert_none(f"{family.name} [{variant.kind}]: greedy outputs differ from the golden recorded on {recorded_on} "
                f"(now {now}):" + (f"\n{hint}" if hint else ""))


def test_stop_token_ends_generation(family, variant, engine):
    run = stop_run(family, variant, engine)
    if run is None:
        pytest.skip(f"{family.name}: fewer than 3 tokens generated; no stop token to try")
    k = run.first_tokens.index(run.stop_id)
    assert run.finish_reason == "stop" and run.stop_reason == run.stop_id, (run.finish_reason, run.stop_reason)
    assert run.stopped_tokens[:k] == run.first_tokens[:k] and len(run.stopped_tokens) <= k + 1
