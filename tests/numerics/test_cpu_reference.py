"""The transformers reference on CPU: the example's requests on the seeded checkpoint (float32,
greedy), recomputed and compared with `snapshots/test_reference/<config>.json` within
`reference.LOGPROB_TOLERANCE`; and the output must see the media (input sensitivity)."""

import pytest

from vlcheck.core.results import Status
from vlcheck.gate.testing import assert_as_declared, run_check
from vlcheck.numerics import reference
from vlcheck.spec.schema import config_id


def test_transformers_reference(family, variant, request):
    """The catalogue's `reference` check (fact `<variant>.reference`), against the stored reference."""
    import transformers

    result = run_check(request, "reference", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    assert_as_declared(result, variant)
    if result.status is Status.DEVIATION:
        pytest.xfail(result.reason)
    runs = reference.runs_of(result.data[f"{variant.kind}.reference"])
    request.node.user_properties.append(("sensitivity", {r.shape: r.sensitivity.other_media_change for r in runs}))

    name = config_id(family, variant)
    header = {"transformers": transformers.__version__, "dtype": "float32", "new_tokens": reference.NEW_TOKENS}
    if request.config.getoption("--snapshot-update"):
        reference.path(name).parent.mkdir(parents=True, exist_ok=True)
        reference.path(name).write_text(reference.document(runs, header))
        return
    stored = reference.load(name)
    if stored is None:
        pytest.fail(f"no reference {reference.path(name).name}: record it with --snapshot-update and read it",
                    pytrace=False)
    problems = reference.compare(stored["runs"], runs)
    recorded_with = stored["transformers"]
    assert not problems, (
        f"{family.name}: the transformers reference moved (recorded with transformers {recorded_with}, this is "
        f"{transformers.__version__}; same seeded weights, so the change is transformers' or its processor's):\n"
        + "\n".join(problems))
