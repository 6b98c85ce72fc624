"""Fixtures of the numerical-conformance tests: the family-config's seeded synthetic checkpoint."""

import pytest


@pytest.fixture
def seeded_dir(family, variant):
    """The seeded checkpoint folder; skips where none can be built (no transformers model class to
    draw the weights from, or a package its model needs is not installed)."""
    from vlcheck.adapter.numerics import NoTransformersModel, require_transformers_model
    from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir

    try:  # asked of the weightless checkpoint (built once) before drawing any weights
        require_transformers_model(checkpoint_dir(family, variant), variant.architecture)
        return checkpoint_dir(family, variant, weights=True)
    except NoTransformersModel as err:
        pytest.skip(f"{family.name}: no seeded weights: {err}")
    except NotBuildable as err:
        pytest.skip(str(err))
    except ImportError as err:
        pytest.skip(f"{family.name}: its model needs a package that is not installed: {str(err).strip()[:200]}")
