"""The transformers reference on CPU: the example's requests on the seeded checkpoint (float32,
greedy), recomputed and compared with `vlcheck/snapshots/test_reference/<config>.json` within
`reference.LOGPROB_TOLERANCE`; and the output must see the media (input sensitivity)."""

import pytest

from vlcheck.runners.testing import assert_as_scoped, expect_deviation, modality_of, run_check
from vlcheck.numerics import reference
from vlcheck.spec.schema import config_id


def test_transformers_reference(family, variant, request):
    """The catalogue's `reference` check (fact `<variant>.reference`), against the stored reference;
    a declaration scoped to some modalities excuses those only."""
    import transformers

    declared = variant.deviation("reference")
    if declared is not None and not declared.modalities:
        expect_deviation(request, variant, "reference")  # the whole check: transformers may not even load it
    result = run_check(request, "reference", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    if f"{variant.kind}.reference" not in result.data:  # transformers failed before any request ran
        pytest.fail(f"{family.name} [{variant.kind}]: {result.reason}", pytrace=False)
    runs = reference.runs_of(result.data[f"{variant.kind}.reference"])
    request.node.user_properties.append(("sensitivity", {r.shape: r.sensitivity.other_media_change for r in runs}))
    blind = {r.shape: reference.sensitivity_problems([r]) for r in runs}

    name = config_id(family, variant)
    header = {"transformers": transformers.__version__, "dtype": "float32", "new_tokens": reference.NEW_TOKENS}
    if request.config.getoption("--snapshot-update"):
        assert not any(blind.values()), f"{family.name}: " + "\n".join(p for ps in blind.values() for p in ps)
        reference.path(name).parent.mkdir(parents=True, exist_ok=True)
        reference.path(name).write_text(reference.document(runs, header))
        return
    stored = reference.load(name)
    if stored is None:
        pytest.fail(f"no reference {reference.path(name).name}: record it with --snapshot-update and read it",
                    pytrace=False)
    problems = {modality_of(r.shape): list(blind[r.shape]) for r in runs}
    if [s["shape"] for s in stored["runs"]] != [r.shape for r in runs]:
        problems["request shapes"] = reference.compare(stored["runs"], runs)  # no modality's: never excused
    else:
        for s, r in zip(stored["runs"], runs):
            problems[modality_of(r.shape)] += reference.compare([s], [r])
    assert_as_scoped(request, variant, "reference", problems,
                     f"{family.name}: the transformers reference moved or does not see its media (recorded with "
                     f"transformers {stored['transformers']}, this is {transformers.__version__}; same seeded weights, "
                     "so the change is transformers' or its processor's):")
