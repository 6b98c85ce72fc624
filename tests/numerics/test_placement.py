"""Where the features land when the question contains the family's placeholder text
(`vlcheck/snapshots/test_placement/<config>.txt`): as served, the template's placeholder must be the one
expanded, never the user's. The catalogue's `placement` check (fact `<variant>.placement`)."""

from vlcheck.runners.testing import assert_as_declared, fact_lines, run_check


def test_features_land_where_the_template_put_them(family, variant, family_snapshot, request):
    """A declared `placement` deviation (a family whose served prompt expands the user's typed
    placeholder) is the only way to pass with the user's placement; the snapshot holds either way."""
    result = run_check(request, "placement", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    lines = [f"# where the {variant.primary_modality} lands when the question types its placeholder: "
             f"{family.name} [{variant.kind}]", *fact_lines(result, variant, "placement")]
    assert "\n".join(lines) + "\n" == family_snapshot
    assert_as_declared(result, variant)
