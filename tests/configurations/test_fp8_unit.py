"""The fp8 configuration's judgement without a GPU: its proof is the loaded layers' quantization
methods (an fp8 engine whose layers run unquantized did not exercise fp8), its own golden is
recorded with its noise and its distance to the unquantized output, and a run is held to both."""

from types import SimpleNamespace

import pytest

from vlcheck.configurations import quantized
from vlcheck.configurations.outcome import Measured
from vlcheck.engine import goldens, runs
from vlcheck.engine.runs import ShapeRun
from vlcheck.spec.registry import get_family

QWEN = get_family("qwen2_vl")


class Workers:
    """`LLM.apply_model` as the engine answers it: one result per tensor-parallel rank."""

    def __init__(self, methods):
        self.methods = methods

    def apply_model(self, fn):
        return [dict(self.methods)]


def handle(tmp_path, methods=None, mode="compare"):
    (tmp_path / "model").mkdir(exist_ok=True)
    return SimpleNamespace(llm=Workers(methods or {}), label="seeded-bfloat16", weights="seeded", platform="gpu",
                           dtype="bfloat16", model_dir=str(tmp_path / "model"), goldens_mode=mode)


def outputs(first: float):
    return [{"prompt_tokens": 30, "token_ids": [5, 7], "top_logprobs": [{"5": first, "6": -2.0}, {"7": -0.1, "8": -3.0}],
             "text": "ab"}]


def run(first: float) -> list[ShapeRun]:
    return [ShapeRun("image x1", [30], [30], ["length"], outputs(first))]


def test_the_proof_is_the_layers_as_loaded_not_the_config(tmp_path):
    measured = Measured()
    quantized.fp8_proof(handle(tmp_path, {"Fp8LinearMethod": 12, "UnquantizedLinearMethod": 2}), measured)
    assert measured.proof["fp8_layers"] == 12 and measured.not_exercised is None
    unquantized = Measured()
    quantized.fp8_proof(handle(tmp_path, {"UnquantizedLinearMethod": 14}), unquantized)
    assert unquantized.proof["fp8_layers"] == 0 and "no loaded layer runs an fp8 method" in unquantized.not_exercised


@pytest.fixture
def golden_root(tmp_path, monkeypatch):
    monkeypatch.setattr(goldens, "GOLDEN_ROOT", tmp_path / "goldens")
    monkeypatch.setattr(runs, "measured_noise", lambda *a, **k: {"alone": {"image x1": 0.001}, "repeat": {"image x1": 0.0}})
    unquantized = goldens.golden_path("seeded-float32", "qwen2_vl-single")
    goldens.save(unquantized, {"image x1": outputs(-0.50)}, {"vllm": "0.24.0", "torch": "2.11.0", "gpu": "cpu",
                                                             "dtype": "float32"})
    return tmp_path


def test_without_its_golden_fp8_fails_saying_how_to_record_it(golden_root):
    measured = Measured()
    quantized.against_goldens(QWEN, QWEN.single, handle(golden_root), run(-0.52), measured)
    assert measured.problems and "no fp8 golden qwen2_vl-single.json" in measured.problems[0]
    assert measured.facts["distance_to_unquantized"] == {"image x1": 0.02}


def test_recorded_then_held_to_its_golden_and_to_its_distance_from_the_unquantized_output(golden_root):
    recorded = Measured()
    quantized.against_goldens(QWEN, QWEN.single, handle(golden_root, mode="record"), run(-0.52), recorded)
    stored = goldens.load(goldens.golden_path("seeded-bfloat16-fp8", "qwen2_vl-single"))
    assert recorded.problems == [] and stored.extra == {"distance_to_unquantized": {"image x1": 0.02}}
    assert stored.noise[goldens.environment("bfloat16")["gpu"]]["alone"] == {"image x1": 0.001}

    same = Measured()
    quantized.against_goldens(QWEN, QWEN.single, handle(golden_root), run(-0.5205), same)
    assert same.problems == [] and same.facts["golden"] == "match"  # 0.0005 within 3 x 0.001

    drifted = Measured()  # 0.1 from the unquantized output: over 3 x the 0.02 recorded, and off its own golden
    quantized.against_goldens(QWEN, QWEN.single, handle(golden_root), run(-0.60), drifted)
    assert any("against the fp8 golden" in p for p in drifted.problems)
    assert any("0.1 nats from the unquantized output, over 0.06" in p for p in drifted.problems)


def test_fp8_generation_and_its_noise_run_one_request_per_batch(monkeypatch):
    # fp8's dynamic activation scale sees the whole batch: batched goldens moved up to 0.73 nats with
    # their neighbours on an H100, so its goldens and their repeat run each request alone
    calls = []

    def run_shape(spec, variant, h, modality, count, alone=False, salt=None, uuid_tag=None):
        calls.append(alone)
        return ShapeRun(f"{modality} x{count}", [30], [30], ["length"], outputs(-0.5))

    monkeypatch.setattr(runs, "run_shape", run_shape)
    monkeypatch.setattr(goldens, "environment", lambda *args: {"gpu": "NVIDIA H100 80GB HBM3"})
    variant = QWEN.variants[0]
    fp8 = SimpleNamespace(generation_runs=None, one_request_per_batch=True, runs_alone=True, dtype="bfloat16")
    found = runs.measured_noise(QWEN, variant, fp8)
    assert calls and all(calls) and set(found) == {"repeat"}
    calls.clear()
    batched = SimpleNamespace(generation_runs=None, one_request_per_batch=False, runs_alone=False, dtype="float32")
    assert set(runs.measured_noise(QWEN, variant, batched)) == {"repeat", "alone"} and not all(calls) and any(calls)


def test_an_engine_whose_core_runs_apart_runs_its_goldens_alone_and_measures_batching_against_them(monkeypatch):
    # qwen2_5_vl on an H100 among 16 family-configs: its second request joined the decode batch otherwise than
    # when the golden was recorded (the core schedules each request as it arrives) and moved 0.0022 nats
    calls = []

    def run_shape(spec, variant, h, modality, count, alone=False, salt=None, uuid_tag=None):
        calls.append((alone, salt))
        return ShapeRun(f"{modality} x{count}", [30], [30], ["length"], outputs(-0.5))

    monkeypatch.setattr(runs, "run_shape", run_shape)
    monkeypatch.setattr(goldens, "environment", lambda *args: {"gpu": "NVIDIA H100 80GB HBM3"})
    variant = QWEN.variants[0]
    shapes = len(variant.modalities) * len(variant.item_counts())
    gpu = SimpleNamespace(generation_runs=None, one_request_per_batch=False, runs_alone=True, dtype="float32")
    assert set(runs.measured_noise(QWEN, variant, gpu)) == {"repeat", "alone"}
    assert calls[:shapes] == [(True, None)] * shapes  # the goldens' own runs: alone
    assert calls[shapes:2 * shapes] == [(True, "vlcheck-repeat")] * shapes  # their repeat: alone, not from the cache
    assert calls[2 * shapes:] == [(False, "vlcheck-batched")] * shapes  # the noise of batching: the other form


def test_runs_alone_where_the_engine_core_is_not_in_this_process():
    from vlcheck.engine.engines import EngineHandle

    def handle(**kw):
        return EngineHandle(key=(), llm=None, weights="seeded", model_dir="", start_seconds=0.0, **kw)

    assert handle(core_in_process=False).runs_alone  # a GPU's LLM, the shared engine
    assert not handle(core_in_process=True).runs_alone  # vLLM's CPU build, chunked's in-process core
    assert handle(core_in_process=True, one_request_per_batch=True).runs_alone  # fp8
