"""The goldens' power: a 1% change of the projector's output (the vision features as the language
model receives them), planted in the running engine, must move the outputs beyond the golden's
tolerance (3 x its measured noise). A golden that cannot tell such a change from noise protects
nothing. Every request shape must catch it; the measured distance and tolerance per shape are kept
with the test's result (on an H100, vLLM 0.24.0: moved 0.0066 to 0.056 nats against tolerances of
0.0003 to 0.007 in 13 family-configs; gemma3's 0.0066 passed the fixed 0.01 of before)."""

import pytest

from vlcheck.engine import goldens, noise
from vlcheck.engine.runs import projector_scaled
from vlcheck.spec.schema import config_id

pytestmark = pytest.mark.gpu

CHANGE = 1.01


def test_goldens_catch_a_one_percent_projector_change(family, variant, engine, request):
    if engine.weights == "synthetic-dummy":
        pytest.skip("vLLM's dummy weights: outputs hardly depend on the media, nothing to catch")
    path = goldens.golden_path(engine.label, config_id(family, variant), engine.platform)
    stored = goldens.load(path)
    if stored is None:
        pytest.skip(f"no golden {path.name} to hold the changed outputs to")
    now = goldens.environment(engine.dtype, engine.model_dir)
    unmeasured = [shape for shape in stored.outputs if noise.tolerance(stored.noise, now["gpu"], shape) is None]
    if unmeasured:
        pytest.skip(f"no measured noise stored with {path.name} for {unmeasured}: a tolerance that is not measured "
                    "says nothing about the goldens' power (measure it: --vlcheck-measure-noise)")
    planted = projector_scaled(family, variant, engine, CHANGE)
    if planted.module is None:
        pytest.skip(f"{family.name}: the loaded model has no projector module by the names vlcheck knows "
                    "(vlcheck/adapter/engine.py PROJECTOR_NAMES)")
    compared = goldens.compare_shapes(stored, planted.outputs, now)
    moved = {shape: goldens.largest_difference(stored.outputs[shape], out) for shape, out in planted.outputs.items()}
    request.node.user_properties.append(("planted", f"{planted.module} x {CHANGE}"))
    for shape, (rule, found) in compared.items():
        request.node.user_properties.append((f"sensitivity {shape}", {"moved": moved[shape], "tolerance": rule.nats,
                                                                      "caught": bool(found)}))
    missed = {shape: str(rule) for shape, (rule, found) in compared.items() if not found}
    assert not missed, (f"{family.name} [{variant.kind}]: {planted.module}'s output x {CHANGE} moved the outputs by "
                        f"{moved} nats; within the goldens' tolerances for {missed}: they cannot tell it from noise there")
