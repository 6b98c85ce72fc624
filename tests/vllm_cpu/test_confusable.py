"""`confusable`: the processor, tiling, placement and video-loader checks on the family's second build,
where config fields that default to one value differ (vlcheck/gate/confusable.py;
`vlcheck/snapshots/test_confusable/<config>.txt`)."""

import dataclasses

import pytest

from vlcheck.gate import confusable
from vlcheck.runners.testing import assert_check_as_snapshot
from vlcheck.spec.registry import all_families


def test_the_checks_hold_on_a_build_that_tells_fields_apart(family, variant, family_snapshot, request):
    """The snapshot holds each check's outcome and facts on the confusable build; the check fails where
    one fails there, unless the spec declares `deviations.confusable`."""
    assert_check_as_snapshot(request, "confusable", family, variant, family_snapshot, "the confusable build")


def test_the_build_differs_from_the_default_one_where_it_says():
    """Every confusable build overrides something the default recipe sets otherwise (or leaves to
    its default), and is a checkpoint of its own (another content hash)."""
    from vlcheck.checkpoints.synthetic import _content_hash

    with_build = [f for f in all_families().values() if f.synthetic is not None and f.synthetic.confusable is not None]
    assert with_build, "no family declares a confusable build"
    for family in with_build:
        recipe, build = family.synthetic, family.synthetic.confusable_build()
        variant = family.single or family.multi_image
        assert build != recipe and build.confusable is None
        assert _content_hash(family, variant, recipe, False) != _content_hash(family, variant, build, False), family.name


def test_declarations_of_the_default_build_do_not_carry_over():
    family = next(f for f in all_families().values() if f.synthetic is not None and f.synthetic.confusable is not None)
    variant = family.single or family.multi_image
    declared = dataclasses.replace(variant, deviations={"processor": object()})
    built, plain = confusable.confusable_spec(family, declared)
    assert plain.deviations == {} and built.synthetic.confusable is None
    assert getattr(built, variant.kind).deviations == {}


def test_a_family_without_a_build_skips_saying_why():
    family = next(f for f in all_families().values() if f.synthetic is not None and f.synthetic.confusable is None
                  and f.single is not None)
    result = confusable.confusable_check(family, family.single)
    assert result.status.value == "skip" and "[synthetic.confusable]" in result.reason
    with pytest.raises(ValueError):
        family.synthetic.confusable_build()
