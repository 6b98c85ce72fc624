"""Bad and hostile inputs through vLLM's processor on CPU, per family with a checkpoint, with the
processor cache on (as an engine serves by default) and off; a case whose outcomes differ
records both and counts as the worse. The catalogue's `hostile` check (fact `<variant>.hostile`).

Outcomes (handled / rejected) are locked in `vlcheck/snapshots/test_hostile_cpu/<family>-<variant>.txt`;
a "broken" outcome fails, unless the spec lists the case under `known_broken`; a listed case
that no longer breaks fails too, so the entry is removed the day vLLM fixes it.
"""

from vlcheck.core.results import Status
from vlcheck.runners.testing import fact_lines, fail_with, run_check


def test_hostile_inputs_on_cpu(family, variant, family_snapshot, request):
    result = run_check(request, "hostile", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    lines = [f"# bad and hostile inputs (vLLM processor, CPU): {family.name} [{variant.kind}]",
             *fact_lines(result, variant, "hostile")]
    assert family_snapshot == "\n".join(lines) + "\n", (
        f"{family.name} [{variant.kind}] hostile inputs: outcomes differ from the snapshot (diff below)")
    if result.status is Status.FAIL:
        fail_with(result, variant)
