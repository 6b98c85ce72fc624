"""The tensor-parallel configurations without GPUs: which family-configs can be split over 2
ranks (known on CPU, a skip with the count that does not divide on the GPU), the engine they
start (the TP-ready checkpoint, 2 ranks, the encoder data-parallel for encoder_dp), and the proof
read from the engine: one answer per worker and the encoder mode it runs."""

import json
from pathlib import Path
from types import SimpleNamespace

from vlcheck.configurations import sharded
from vlcheck.configurations.checks import engine_overrides
from vlcheck.configurations.offline import parallel_proof
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import CONFIGURATIONS
from vlcheck.engine.engines import engine_args
from vlcheck.engine.tensor_parallel import TP_READY_HEADS
from vlcheck.spec.registry import get_family

QWEN = get_family("qwen2_vl")
TP2, ENCODER_DP = CONFIGURATIONS["tp2"], CONFIGURATIONS["encoder_dp"]
TP4, ENCODER_DP4, PP2_TP2 = CONFIGURATIONS["tp4"], CONFIGURATIONS["encoder_dp4"], CONFIGURATIONS["pp2_tp2"]


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
    def __init__(self, workers: int, mode: str, tp: int | None = None, pp: int = 1):
        self.workers = workers
        parallel = SimpleNamespace(tensor_parallel_size=workers // pp if tp is None else tp, pipeline_parallel_size=pp)
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(
            parallel_config=parallel, model_config=SimpleNamespace(multimodal_config=SimpleNamespace(mm_encoder_tp_mode=mode))))

    def apply_model(self, fn):
        return [{"UnquantizedLinearMethod": 10}] * self.workers


def proof(config, engine) -> Measured:
    measured = Measured()
    parallel_proof(SimpleNamespace(llm=engine), config, measured)
    return measured


def test_the_proof_is_the_workers_that_answered_and_the_encoder_mode_the_engine_runs():
    ran = proof(ENCODER_DP, Engine(2, "data"))
    assert ran.not_exercised is None
    assert ran.proof == {"workers": 2, "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "mm_encoder_tp_mode": "data"}
    one = proof(TP2, Engine(1, "weights", tp=2))
    assert one.not_exercised == ("the engine answered from 1 worker(s) at tensor_parallel_size 2, pipeline_parallel_size 1, "
                                 "not 2 at 2 x 1")
    assert "not run data-parallel" in proof(ENCODER_DP, Engine(2, "weights")).not_exercised
    sharded_weights = proof(TP2, Engine(2, "weights"))  # tp2 asks for no encoder mode: the default one is its path
    assert sharded_weights.not_exercised is None and sharded_weights.proof["workers"] == 2


def test_four_gpus_are_four_workers_at_the_sizes_the_configuration_names():
    assert proof(TP4, Engine(4, "weights")).not_exercised is None
    assert proof(PP2_TP2, Engine(4, "weights", pp=2)).not_exercised is None
    # four workers as TP=4 are not pipeline stages: the path pp2_tp2 names did not run
    assert "tensor_parallel_size 4, pipeline_parallel_size 1" in proof(PP2_TP2, Engine(4, "weights")).not_exercised
    assert "2 worker(s)" in proof(TP4, Engine(2, "weights")).not_exercised
    assert "not run data-parallel" in proof(ENCODER_DP4, Engine(4, "weights")).not_exercised


def test_the_four_gpu_configurations_take_four_and_split_where_the_checkpoint_does():
    for config in (TP4, ENCODER_DP4, PP2_TP2):
        assert config.gpus == 4 and config.checkpoint == "tp_ready" and config.platforms == ("gpu",)
    assert sharded.layout(PP2_TP2) == "PP=2 x TP=2" and sharded.layout(TP4) == "TP=4"
    assert sharded.applies(QWEN, QWEN.single, TP4) is None
    assert sharded.applies(QWEN, QWEN.single, PP2_TP2) is None
    idefics3 = get_family("idefics3")  # no SupportsPP in vLLM: pp2_tp2 skips before an engine starts
    assert "does not support pipeline parallelism" in sharded.applies(idefics3, idefics3.variants[0], PP2_TP2)
    llava = get_family("llava")
    assert "no data-parallel encoder" in sharded.applies(llava, llava.single, ENCODER_DP4)


def test_vlcheck_tp_n_selects_the_tpn_configuration_and_names_the_sizes_it_has():
    import pytest

    from vlcheck.runners.plugin_collection import tensor_parallel_configurations

    def options(size):
        return SimpleNamespace(getoption=lambda name: size)

    assert tensor_parallel_configurations(options(None)) == []
    assert tensor_parallel_configurations(options(4)) == ["tp4"]
    with pytest.raises(pytest.UsageError, match="no tp3 configuration \\(sizes: 2, 4\\)"):
        tensor_parallel_configurations(options(3))
