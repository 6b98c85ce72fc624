"""Tensor parallelism per family-config: the TP-ready synthetic checkpoint with seeded weights,
served at tensor_parallel_size 1 and N (--vlcheck-tp N), gives the same greedy outputs under
vLLM's check_logprobs_close rule (equal tokens, or at the first difference each side's token in
the other's top-5 logprobs). This exercises each model's sharded vision tower, projector and
language model, the code that breaks after upgrades and that one GPU never runs."""

import pytest

from vlcheck.engine import goldens
from vlcheck.engine.runs import generation_runs
from vlcheck.engine.tensor_parallel import COMPARED_AND_DIFFERED, plan

pytestmark = pytest.mark.gpu


def test_tensor_parallel_outputs_match_tp1(family, variant, engines, tp_ready_engine, request):
    size = request.config.getoption("--vlcheck-tp")
    if size is None:
        pytest.skip("needs --vlcheck-tp N (N GPUs per family-config)")
    why_not = plan(family, variant).why_not(size)
    if why_not:
        pytest.skip(why_not)
    runs = {}
    for tp in (1, size):
        engine = tp_ready_engine(tp)
        runs[tp] = {r.shape: r.outputs for r in generation_runs(family, variant, engine)}
        request.node.user_properties.append((f"tp{tp}_engine_start_s", round(engine.start_seconds, 1)))
    engines.close()  # the other tests of this family-config want their own engine back, on one GPU
    unusable = [f"TP={tp} {shape}: {p}" for tp, by_shape in runs.items() for shape, out in by_shape.items()
                for p in goldens.unusable(out)]
    assert not unusable, "\n".join(unusable)
    assert set(runs[1]) == set(runs[size])
    problems = [f"{shape}: {p}" for shape in runs[1] for p in goldens.logprobs_close(runs[1][shape], runs[size][shape])]
    assert not problems, f"TP={size} {COMPARED_AND_DIFFERED}:\n" + "\n".join(problems)
    compared = sum(len(out) for out in runs[1].values())
    request.node.user_properties.append(("tp_compared_requests", compared))
