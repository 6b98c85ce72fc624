"""Every spec's architecture against the installed vLLM: registered, multimodal, imports, takes
the example's modalities. This is where a transformers release that breaks a vLLM model import
shows up (vLLM 0.24.0 with transformers 5.17.0: llava, pixtral, mistral3)."""

import dataclasses

from vlcheck import adapter
from vlcheck.core.results import Status
from vlcheck.cpu.vllm_checks import architecture_check
from vlcheck.runners.testing import assert_as_declared, run_check
from vlcheck.spec.registry import get_family


def test_architecture_is_served(family, variant, request):
    result = run_check(request, "architecture", family, variant)
    if result is not None:  # None: compared with --vlcheck-baseline
        assert_as_declared(result, variant)


def _with(variant, **changes):
    return dataclasses.replace(variant, deviations={}, **changes)


def test_unregistered_architecture_fails_naming_family():
    spec = get_family("llava")
    result = architecture_check(spec, _with(spec.single, architecture="LlavaForCausalLMThatDoesNotExist"))
    assert result.status is Status.FAIL
    assert result.reason == ("[single] llava: LlavaForCausalLMThatDoesNotExist is not a supported architecture of vllm "
                             f"{adapter.version()}")


def test_modality_the_model_does_not_take_fails():
    spec = get_family("llava")
    video = dataclasses.replace(spec.single.modalities["image"])
    result = architecture_check(spec, _with(spec.single, modalities={**spec.single.modalities, "video": video}))
    assert result.status is Status.FAIL and "does not take video" in result.reason


def test_import_failure_is_reported(monkeypatch):
    from vlcheck import adapter

    def broken(arch):
        raise ImportError("cannot import name 'PixtralRotaryEmbedding' from 'transformers.models.pixtral'")

    monkeypatch.setattr(adapter, "load_model_class", broken)
    spec = get_family("pixtral_hf")
    result = architecture_check(spec, spec.single)
    assert result.status is Status.FAIL and "PixtralRotaryEmbedding" in result.reason
