"""Real vLLM generation per family-config: the example's requests complete, prompt token counts
equal the CPU processor's, stop tokens end generation, greedy outputs match the goldens."""

import os
from pathlib import Path

import pytest

from vlcheck.runners.testing import assert_as_scoped, modality_of
from vlcheck.engine import goldens
from vlcheck.engine.runs import generation_runs, record_golden, remeasured_noise, stop_run, tiling_runs
from vlcheck.spec.schema import config_id

pytestmark = [pytest.mark.engine, pytest.mark.sends("image", "video", "audio")]  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin


def test_requests_complete_with_processor_token_counts(family, variant, engine, request):
    runs = generation_runs(family, variant, engine)
    for run in runs:
        assert all(r in ("stop", "length") for r in run.finish_reasons), f"{family.name} {run.shape}: {run.finish_reasons}"
        assert run.prompt_tokens == run.expected_prompt_tokens, (
            f"{family.name} {run.shape}: engine saw {run.prompt_tokens} prompt tokens, "
            f"the CPU processor gives {run.expected_prompt_tokens}")
    request.node.user_properties.append(("weights", engine.weights))
    request.node.user_properties.append(("shapes", {r.shape: r.prompt_tokens for r in runs}))


def test_images_that_tile_reach_the_engine_as_processed(family, variant, engine, request):
    """The `tiling` check's images (past every family's tile, grid and resolution bounds) through the
    engine: each completes with the prompt token count vLLM's CPU processor gives for it."""
    if "image" not in variant.modalities:
        pytest.skip(f"{family.name} [{variant.kind}] takes no images")
    runs = tiling_runs(family, variant, engine)
    sent = [r for r in runs if not r.not_sent]
    request.node.user_properties.append(("tiling", {r.label: r.prompt_tokens or f"not sent: {r.not_sent}"
                                                    for r in runs}))
    for run in sent:
        assert run.finish_reason in ("stop", "length"), f"{family.name} {run.label}: {run.finish_reason}"
        assert run.prompt_tokens == run.expected_prompt_tokens, (
            f"{family.name} image {run.label}: engine saw {run.prompt_tokens} prompt tokens, "
            f"the CPU processor gives {run.expected_prompt_tokens}")
    if not sent:
        pytest.skip(f"{family.name} [{variant.kind}]: no tiling request fits the engine: "
                    + "; ".join(f"{r.label}: {r.not_sent}" for r in runs))


def test_greedy_outputs_match_golden(family, variant, engine, request):
    """Token ids and top-5 logprobs within measured noise of the golden: 3 x the noise stored with
    it for this request shape and GPU (`engine/noise.py`: each request alone, a repeat, the golden
    replayed on another GPU); vLLM's top-5-membership rule let a 1% vision-encoder change through.
    --vlcheck-update-goldens records the golden and its noise, --vlcheck-measure-noise measures the
    noise of this GPU for the golden as it is. A declared `golden` deviation (dummy weights give
    outputs that cannot be a golden, e.g. NaN) covers vLLM's dummy weights only, and only its modalities."""
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

    stored = goldens.load(path)
    if request.config.getoption("--vlcheck-update-goldens"):
        assert_none("the outputs cannot be a golden:")
        path = goldens.golden_path(engine.label, config_id(family, variant), engine.platform, recording=True)
        request.node.user_properties.append(("noise", record_golden(family, variant, engine, path, actual).noise))
        return
    if stored is None:
        if engine.platform == "cpu":  # a machine of another instruction-set class than those recorded: cannot compare
            pytest.skip(goldens.missing_golden(path))
        pytest.fail(goldens.missing_golden(path), pytrace=False)
    assert set(actual) == set(stored.outputs), f"request shapes {sorted(actual)}, golden has {sorted(stored.outputs)}"
    if request.config.getoption("--vlcheck-measure-noise"):
        try:
            stored = remeasured_noise(family, variant, engine, path, stored)
        except ValueError as err:  # another vLLM, torch or dtype than the golden's
            pytest.fail(f"{family.name} [{variant.kind}]: {err}", pytrace=False)
        request.node.user_properties.append(("noise", stored.noise[now["gpu"]]))
    for shape, (rule, moved) in goldens.compare_shapes(stored, actual, now).items():
        problems[modality_of(shape)] += [f"{shape}: {p}" for p in moved]
        request.node.user_properties.append((f"golden_rule {shape}", str(rule)))
        request.node.user_properties.append((f"golden_distance {shape}",
                                             goldens.largest_difference(stored.outputs[shape], actual[shape])))
    hint = goldens.other_checkpoint(stored.recorded_on, now) if any(problems.values()) else None
    assert_none(f"{family.name} [{variant.kind}]: greedy outputs differ from the golden recorded on {stored.recorded_on} "
                f"(now {now}):" + (f"\n{hint}" if hint else ""))


def test_stop_token_ends_generation(family, variant, engine):
    run = stop_run(family, variant, engine)
    if run is None:
        pytest.skip(f"{family.name}: fewer than 3 tokens generated; no stop token to try")
    k = run.first_tokens.index(run.stop_id)
    assert run.finish_reason == "stop" and run.stop_reason == run.stop_id, (run.finish_reason, run.stop_reason)
    assert run.stopped_tokens[:k] == run.first_tokens[:k] and len(run.stopped_tokens) <= k + 1
