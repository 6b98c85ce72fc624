"""Bad and hostile inputs through a live engine (GPU). Same outcomes as on CPU, plus: the engine
must still answer a normal request after every rejection, and a uuid reused for a different
image shows what vLLM's uuid-keyed cache does (it serves the first image's features)."""

import pytest

from vlcheck.hostile.inputs import UUID_REUSE, document, run_gpu

pytestmark = pytest.mark.gpu


def test_hostile_inputs_on_gpu(family, variant, engine, family_snapshot):
    outcomes = run_gpu(family, variant, engine)
    broken = [o for o in outcomes if o.kind == "broken" and variant.broken_case(o.case) is None]
    assert family_snapshot == document(family, variant, outcomes, "vLLM engine, GPU"), (
        f"{family.name} [{variant.kind}] hostile inputs: engine outcomes differ from the snapshot (diff below)")
    assert not broken, f"{family.name} [{variant.kind}] hostile inputs: broken in the engine:\n" + "\n".join(o.line() for o in broken)
    reuse = [o for o in outcomes if o.case == UUID_REUSE]
    if reuse:
        assert "STALE FEATURES" in reuse[0].how, reuse[0].how  # the known hazard, shown plainly
