"""Where the features land when the question contains the family's placeholder text
(`vlcheck/snapshots/test_placement/<config>.txt`): as served, the template's placeholder must be the one
expanded, never the user's. The catalogue's `placement` check (fact `<variant>.placement`)."""

from vlcheck.runners.testing import assert_check_as_snapshot


def test_features_land_where_the_template_put_them(family, variant, family_snapshot, request):
    """A declared `placement` deviation (a family whose served prompt expands the user's typed
    placeholder) is the only way to pass with the user's placement; the snapshot holds either way."""
    assert_check_as_snapshot(request, "placement", family, variant, family_snapshot,
                             f"where the {variant.primary_modality} lands when the question types its placeholder")
