"""Bad and hostile inputs through vLLM's processor on CPU, per family with a checkpoint, with the
processor cache on (as an engine serves by default) and off; a case whose outcomes differ
records both and counts as the worse.

Outcomes (handled / rejected) are locked in `snapshots/test_hostile_cpu/<family>-<variant>.txt`;
a "broken" outcome fails, unless the spec lists the case under `known_broken`; a listed case
that no longer breaks fails too, so the entry is removed the day vLLM fixes it.
"""

import pytest

from vlcheck.checkpoints.synthetic import NotBuildable
from vlcheck.hostile.inputs import document, run_cpu
from vlcheck.prompt.templates import TemplateUnavailable


def test_hostile_inputs_on_cpu(family, variant, family_snapshot):
    if variant.deviation("processor") is not None:
        pytest.skip(f"{family.name}: its processor is known broken: {variant.deviation('processor')}")
    try:
        outcomes = run_cpu(family, variant)
    except NotBuildable as err:
        pytest.skip(f"no checkpoint: {err}")
    except TemplateUnavailable as err:
        pytest.skip(f"the example renders with the model's chat template: {err}")
    broken = [o for o in outcomes if o.kind == "broken"]
    unexpected = [o.line() for o in broken if variant.broken_case(o.case) is None]
    stale = [c for c in variant.broken_cases if c not in {o.case for o in broken}]
    assert family_snapshot == document(family, variant, outcomes, "vLLM processor, CPU"), (
        f"{family.name} [{variant.kind}] hostile inputs: outcomes differ from the snapshot (diff below)")
    assert not unexpected, f"{family.name} [{variant.kind}] hostile inputs: broken on vLLM's processor:\n" + "\n".join(unexpected)
    assert not stale, (f"{family.name} [{variant.kind}] hostile inputs: known_broken cases now work "
                       f"(remove them from the spec, or narrow their versions): {stale}")
