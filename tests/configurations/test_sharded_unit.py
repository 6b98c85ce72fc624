"""The tensor-parallel configurations without GPUs: which family-configs can be split over 2
ranks (known on CPU, a skip with the count that does not divide on the GPU), the engine they
start (the TP-ready checkpoint, 2 ranks, the encoder data-parallel for encoder_dp), and the proof
read from the engine: one answer per worker and the encoder mode it runs."""

import json
from pathlib import Path
from types import SimpleNamespace

from vlcheck.configurations import sharded
from vlcheck.configurations.checks import engine_overrides
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import CONFIGURATIONS
from vlcheck.engine.engines import engine_args
from vlcheck.engine.tensor_parallel import TP_READY_HEADS
from vlcheck.spec.registry import get_family

QWEN = get_family("qwen2_vl")
TP2, ENCODER_DP = CONFIGURATIONS["tp2"], CONFIGURATIONS["encoder_dp"]


def test_both_take_two_gpus_and_the_tp_ready_checkpoint_at_tp2():
    for config in (TP2, ENCODER_DP):
        assert config.gpus == 2 and config.platforms == ("gpu",)
        args, weights, model = engine_args(QWEN, QWEN.single, "auto", **engine_overrides(config))
        assert args["tensor_parallel_size"] == 2 and weights == "seeded"
        text = json.loads((Path(model) / "config.json").read_text()).get("text_config") or {}
        heads = text.get("num_attention_heads") or json.loads((Path(model) / "config.json").read_text())["num_attention_heads"]
        assert heads == TP_READY_HEADS
    assert engine_overrides(ENCODER_DP)["mm_encoder_tp_mode"] == "data" and "mm_encoder_tp_mode" not in TP2.engine_args


def test_a_family_config_that_splits_applies_and_one_that_cannot_says_why():
    assert sharded.applies(QWEN, QWEN.single) is None
    mllama = get_family("mllama")
    assert "no TP-ready synthetic checkpoint" in sharded.applies(mllama, mllama.single)


def test_encoder_dp_applies_only_where_vllms_model_has_a_data_parallel_encoder():
    # On two H100s (vLLM 0.24.0) 21 family-configs started a TP=2 engine for encoder_dp only for vLLM to
    # fall back to mm_encoder_tp_mode=weights; the model class says so before any engine starts.
    assert sharded.applies(QWEN, QWEN.single, ENCODER_DP) is None
    assert sharded.applies(QWEN, QWEN.single, TP2) is None
    llava = get_family("llava")
    why = sharded.applies(llava, llava.single, ENCODER_DP)
    assert "LlavaForConditionalGeneration has no data-parallel encoder" in why
    assert sharded.applies(llava, llava.single, TP2) is None


class Engine:
    def __init__(self, workers: int, mode: str):
        self.workers = workers
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(
            model_config=SimpleNamespace(multimodal_config=SimpleNamespace(mm_encoder_tp_mode=mode))))

    def apply_model(self, fn):
        return [{"UnquantizedLinearMethod": 10}] * self.workers


def test_the_proof_is_the_workers_that_answered_and_the_encoder_mode_the_engine_runs():
    ran = Measured()
    sharded.sharding_proof(SimpleNamespace(llm=Engine(2, "data")), ENCODER_DP, ran)
    assert ran.not_exercised is None and ran.proof == {"tensor_parallel_workers": 2, "mm_encoder_tp_mode": "data"}
    one = Measured()
    sharded.sharding_proof(SimpleNamespace(llm=Engine(1, "weights")), TP2, one)
    assert one.not_exercised == "the engine answered from 1 worker(s), not 2"
    weights = Measured()
    sharded.sharding_proof(SimpleNamespace(llm=Engine(2, "weights")), ENCODER_DP, weights)
    assert "not run data-parallel" in weights.not_exercised
    sharded_weights = Measured()  # tp2 asks for no encoder mode: the default one is its path
    sharded.sharding_proof(SimpleNamespace(llm=Engine(2, "weights")), TP2, sharded_weights)
    assert sharded_weights.not_exercised is None and sharded_weights.proof["tensor_parallel_workers"] == 2
