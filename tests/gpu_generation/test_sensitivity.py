"""The goldens' power: a 1% change of the projector's output (the vision features as the language
model receives them), planted in the running engine, must move the outputs beyond the golden's
tolerance (3 x its measured noise). A golden that cannot tell such a change from noise protects
nothing; the measured distance and tolerance per shape are kept with the test's result."""

import pytest

from vlcheck.engine import goldens
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
    planted = projector_scaled(family, variant, engine, CHANGE)
    if planted.module is None:
        pytest.skip(f"{family.name}: the loaded model has no projector module by the names vlcheck knows "
                    "(vlcheck/adapter/engine.py PROJECTOR_NAMES)")
    now = goldens.environment(engine.dtype, engine.model_dir)
    compared = goldens.compare_shapes(stored, planted.outputs, now)
    moved = {shape: goldens.largest_difference(stored.outputs[shape], out) for shape, out in planted.outputs.items()}
    request.node.user_properties.append(("planted", f"{planted.module} x {CHANGE}"))
    for shape, (rule, found) in compared.items():
        request.node.user_properties.append((f"sensitivity {shape}", {"moved": moved[shape], "tolerance": rule.nats,
                                                                      "caught": bool(found)}))
    caught = [shape for shape, (_, found) in compared.items() if found]
    assert caught, (f"{family.name} [{variant.kind}]: {planted.module}'s output x {CHANGE} moved the outputs by "
                    f"{moved} nats, within the goldens' tolerances "
                    f"{ {shape: str(rule) for shape, (rule, _) in compared.items()} }: they cannot tell it from noise")
