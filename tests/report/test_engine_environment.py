"""What a test engine's processes inherit (vlcheck/engine/engines.py): no engine needed."""
from vlcheck.engine.engines import engine_environment


def test_a_test_engine_samples_without_flashinfers_jit_compiled_sampler(monkeypatch):
    monkeypatch.delenv("VLLM_USE_FLASHINFER_SAMPLER", raising=False)
    assert engine_environment("bfloat16") == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}


def test_a_float32_engine_also_computes_without_tf32(monkeypatch):
    monkeypatch.delenv("VLLM_USE_FLASHINFER_SAMPLER", raising=False)
    assert engine_environment("float32") == {"VLLM_USE_FLASHINFER_SAMPLER": "0", "NVIDIA_TF32_OVERRIDE": "0"}


def test_the_users_own_sampler_choice_is_kept(monkeypatch):
    monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "1")
    assert engine_environment("auto") == {}
