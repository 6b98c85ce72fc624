"""The `defaults` configuration's proof, on stand-ins for the worker's objects: which backends the
layers report, which steps count as image prefills a CUDA graph replayed, and when the path did not run."""

from types import SimpleNamespace

import torch

from vlcheck.adapter import engine_paths
from vlcheck.configurations.vllm_defaults import why_path_did_not_run


class MMEncoderAttention(torch.nn.Module):
    def __init__(self, backend):
        super().__init__()
        self.attn_backend = backend


class Attention(torch.nn.Module):
    def __init__(self, name):
        super().__init__()
        self.attn_backend = type(name, (), {"get_name": staticmethod(lambda: name)})


def test_backends_are_split_into_the_vision_encoders_enum_members_and_the_decoders_classes():
    model = torch.nn.Sequential(MMEncoderAttention(SimpleNamespace(name="FLASH_ATTN")),
                                MMEncoderAttention(SimpleNamespace(name="FLASH_ATTN")), Attention("FLASHINFER"),
                                torch.nn.Linear(2, 2))
    assert engine_paths.attention_backends(model) == {"vision_encoder": ["FLASH_ATTN"], "decoder": ["FLASHINFER"]}


def test_a_recorded_step_counts_as_a_replayed_image_prefill_only_with_encoder_inputs_under_a_graph():
    steps = engine_paths.Steps([("PIECEWISE", 90, 96, 1), ("NONE", 5000, 5000, 1), ("FULL", 4, 4, 0),
                                ("NONE", 30, 30, 0)])
    assert steps.summary() == {"steps": 4, "graph_replays": 2, "image_prefill_steps": 2, "image_prefill_replays": 1,
                               "largest_image_prefill_tokens": 5000}


def test_the_recorder_wraps_the_model_runners_step_decision_and_keeps_what_it_decided():
    decided = []

    def decide(num_tokens, num_reqs, **kwargs):
        decided.append(num_tokens)
        return SimpleNamespace(name="PIECEWISE"), SimpleNamespace(num_tokens=96), False, None, None

    worker = SimpleNamespace(model_runner=SimpleNamespace(_determine_batch_execution_and_padding=decide))
    engine_paths.start_recording_steps(worker)
    worker.model_runner._determine_batch_execution_and_padding(num_tokens=90, num_reqs=1, num_encoder_reqs=1)
    assert decided == [90] and engine_paths.recorded_steps(worker) == [("PIECEWISE", 90, 96, 1)]
    engine_paths.start_recording_steps(worker)  # again: a fresh record, the same wrapper
    assert engine_paths.recorded_steps(worker) == []


def test_a_model_runner_without_the_step_decision_is_named():
    import pytest

    worker = SimpleNamespace(model_runner=SimpleNamespace())
    with pytest.raises(engine_paths.StepsUnreadable, match="has neither _determine_batch_execution_and_padding nor"):
        engine_paths.start_recording_steps(worker)


PROOF = {"compilation_mode": "VLLM_COMPILE", "model_runner": "vllm.v1.worker.gpu_model_runner.GPUModelRunner", "cudagraph_mode": "FULL_AND_PIECEWISE", "largest_capture_size": 4096,
         "steps": 20, "image_prefill_steps": 3, "image_prefill_replays": 2, "largest_image_prefill_tokens": 300}


def test_the_path_ran_when_compiled_and_a_graph_replayed_an_image_prefill():
    assert why_path_did_not_run("gpu", PROOF, None) is None


def test_without_a_replayed_image_prefill_on_a_gpu_the_path_did_not_run_and_the_sizes_say_why():
    why = why_path_did_not_run("gpu", {**PROOF, "image_prefill_replays": 0, "largest_image_prefill_tokens": 5000}, None)
    assert "none of the 3 steps that prefilled an image replayed a CUDA graph" in why and "5000 tokens" in why
    assert why_path_did_not_run("cpu", {**PROOF, "image_prefill_replays": 0}, None) is None  # no CUDA graphs there


def test_an_uncompiled_engine_or_unreadable_steps_did_not_run_the_path():
    assert "did not compile" in why_path_did_not_run("gpu", {**PROOF, "compilation_mode": "NONE"}, None)
    assert "cannot be read" in why_path_did_not_run("gpu", PROOF, "no hook")
    assert "no model step computed media" in why_path_did_not_run("gpu", {**PROOF, "image_prefill_steps": 0}, None)


def test_the_second_model_runners_steps_are_read_from_its_modules_dispatch_and_its_execute_model(monkeypatch):
    import sys
    import types

    module = types.ModuleType("fake_runner_v2")

    def dispatch_cg_and_sync_dp(manager, num_reqs, num_tokens, uniform, dp_size, dp_rank, need_eager=False):
        return SimpleNamespace(cg_mode=SimpleNamespace(name="FULL"), num_tokens=128), None

    module.dispatch_cg_and_sync_dp = dispatch_cg_and_sync_dp
    monkeypatch.setitem(sys.modules, "fake_runner_v2", module)

    class Runner:
        def execute_model(self, scheduler_output):
            return module.dispatch_cg_and_sync_dp(None, 1, scheduler_output.total_num_scheduled_tokens, None, 1, 0)

    Runner.__module__ = "fake_runner_v2"
    worker = SimpleNamespace(model_runner=Runner())
    engine_paths.start_recording_steps(worker)
    worker.model_runner.execute_model(SimpleNamespace(scheduled_encoder_inputs={"r0": [0]}, total_num_scheduled_tokens=100))
    worker.model_runner.execute_model(SimpleNamespace(scheduled_encoder_inputs={}, total_num_scheduled_tokens=1))
    assert engine_paths.recorded_steps(worker) == [("FULL", 100, 128, 1), ("FULL", 1, 128, 0)]


def test_defaults_v2_applies_only_where_vllm_has_a_second_model_runner(monkeypatch):
    from vlcheck.configurations.registry import CONFIGURATIONS
    from vlcheck.configurations.vllm_defaults import applies
    from vlcheck.spec.registry import get_family

    qwen = get_family("qwen2_vl")
    assert applies(qwen, qwen.single, CONFIGURATIONS["defaults"]) is None
    assert engine_paths.vllm_has_variable("VLLM_USE_V2_MODEL_RUNNER")  # vLLM 0.24.0 has it
    monkeypatch.setattr(engine_paths, "vllm_has_variable", lambda name: False)
    assert "no second model runner" in applies(qwen, qwen.single, CONFIGURATIONS["defaults_v2"])
