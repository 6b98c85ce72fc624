"""Processor fingerprints: the tensors vLLM's processor hands the model, per request shape, one line
per tensor (`snapshots/test_fingerprints/<config>.txt`): a preprocessing change names its tensor."""

import pytest

from vlcheck import adapter
from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir
from vlcheck.gate.testing import expect_deviation
from vlcheck.gpu.engines import variant_engine_args
from vlcheck.numerics.fingerprint import fingerprint_lines


def test_processor_fingerprints(family, variant, family_snapshot, request):
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        local = checkpoint_dir(family, variant)
    except NotBuildable as err:
        pytest.skip(str(err))
    expect_deviation(request, variant, "processor")
    try:
        # float32: the values as the processor computes them (an engine casts them to its dtype after)
        processor = adapter.create_processor(str(local), {**variant_engine_args(variant), "dtype": "float32"})
        lines = fingerprint_lines(family, variant, processor)
    except ImportError as err:
        pytest.skip(f"{family.name}: its processor needs a package that is not installed: {err}")
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")
    header = [f"# tensors vLLM's processor hands the model: {family.name} [{variant.kind}] (synthetic checkpoint)"]
    assert "\n".join(header + lines) + "\n" == family_snapshot
