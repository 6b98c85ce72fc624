"""The transformers reference on CPU: the example's requests on the seeded checkpoint (float32,
greedy), recomputed and compared with `snapshots/test_reference/<config>.json` within
`reference.LOGPROB_TOLERANCE`; and the output must see the media (input sensitivity)."""

import pytest

from vlcheck.gate.testing import expect_deviation
from vlcheck.numerics import reference
from vlcheck.spec.schema import config_id


def test_transformers_reference(family, variant, seeded_dir, request):
    import transformers

    from vlcheck.prompt.templates import TemplateUnavailable

    expect_deviation(request, variant, "reference")

    try:
        requests = reference.requests(family, variant)
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")
    ref = reference.Reference(seeded_dir, family, variant)
    runs = [ref.run(r) for r in requests]
    request.node.user_properties.append(("sensitivity", {r.shape: r.sensitivity.other_media_change for r in runs}))
    problems = reference.sensitivity_problems(runs)
    assert not problems, f"{family.name}: " + "\n".join(problems)

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
