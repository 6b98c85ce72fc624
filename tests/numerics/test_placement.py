"""Where the features land when the question contains the family's placeholder text
(`snapshots/test_placement/<config>.txt`): as served, the template's placeholder must be the one
expanded, never the user's."""

import pytest

from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir
from vlcheck.gate.testing import expect_deviation
from vlcheck.gpu.engines import variant_engine_args
from vlcheck.hostile.placement import USERS, placements


def test_features_land_where_the_template_put_them(family, variant, family_snapshot, request):
    """A declared `placement` deviation (a family whose served prompt expands the user's typed
    placeholder) makes the last assertion a strict expected failure; the snapshot still holds."""
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        local = checkpoint_dir(family, variant)
        found = placements(family, variant, str(local), variant_engine_args(variant))
    except NotBuildable as err:
        pytest.skip(str(err))
    except ImportError as err:
        pytest.skip(f"{family.name}: its processor needs a package that is not installed: {err}")
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")
    lines = [f"# where the {variant.primary_modality} lands when the question types its placeholder: "
             f"{family.name} [{variant.kind}]", *(p.line() for p in found)]
    assert "\n".join(lines) + "\n" == family_snapshot
    expect_deviation(request, variant, "placement")
    served = found[0]
    assert served.outcome != USERS, f"{family.name}: as served, the features land where the user typed: {served.detail}"
