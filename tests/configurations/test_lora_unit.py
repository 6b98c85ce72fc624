"""The `lora` and `spec_ngram` configurations without an engine: the adapters peft writes over a
seeded checkpoint (what they target, that they move transformers' answer, that they are built once),
the cell's rules on fabricated answers (an adapter not applied, a mixed batch that leaks one
adapter into another row, the CPU build's declared finding), and which families skip before any
engine starts."""

import json

import pytest

from vlcheck.configurations import lora as lora_check
from vlcheck.configurations import speculative
from vlcheck.configurations.offline import applies as pipeline_applies
from vlcheck.configurations.outcome import Measured, cell
from vlcheck.configurations.registry import CONFIGURATIONS
from vlcheck.core.results import Status
from vlcheck.spec.registry import get_family

pytest.importorskip("peft")


@pytest.fixture(scope="module")
def qwen2_vl_adapters():
    from vlcheck.checkpoints import lora
    from vlcheck.checkpoints.synthetic import checkpoint_dir

    family = get_family("qwen2_vl")
    variant = family.variants[0]
    folder = checkpoint_dir(family, variant, weights=True)
    return family, variant, folder, {n: lora.adapter_dir(folder, variant.architecture, n) for n in lora.ADAPTERS}


def test_adapters_target_the_language_model_only_and_are_built_once(qwen2_vl_adapters):
    from vlcheck.checkpoints import lora

    family, variant, folder, adapters = qwen2_vl_adapters
    config = json.loads((adapters["a"] / "adapter_config.json").read_text())
    targets = config["target_modules"]
    assert config["r"] == lora.RANK and config["lora_alpha"] == lora.ALPHA
    assert targets and all(".language_model." in t for t in targets)  # qwen2_vl: model.language_model.layers.N...
    assert not any("visual" in t or t.endswith("lm_head") for t in targets)
    assert {t.rsplit(".", 1)[-1] for t in targets} == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                       "down_proj"}
    assert adapters["a"] != adapters["b"]
    stamp = (adapters["a"] / "adapter_model.safetensors").stat().st_mtime_ns
    assert lora.adapter_dir(folder, variant.architecture, "a") == adapters["a"]
    assert (adapters["a"] / "adapter_model.safetensors").stat().st_mtime_ns == stamp


def test_each_adapter_moves_transformers_first_step_and_the_two_differ(qwen2_vl_adapters):
    from vlcheck.numerics import reference

    family, variant, folder, adapters = qwen2_vl_adapters
    requests = [r for r in reference.requests(family, variant) if r.modality == "image"]
    answers = lora_check._peft_answers(family, variant, str(folder), requests, {k: str(v) for k, v in adapters.items()})
    first = {name: answers[0][name]["top_logprobs"][0] for name in (None, "a", "b")}
    assert reference.top_change(first["a"], first[None]) >= reference.SENSITIVITY_MIN
    assert reference.top_change(first["b"], first[None]) >= reference.SENSITIVITY_MIN
    assert reference.top_change(first["a"], first["b"]) >= reference.SENSITIVITY_MIN


class _Request:
    shape, modality = "image x1", "image"


def _answer(tokens, top):
    return {"prompt_tokens": 10, "token_ids": tokens, "top_logprobs": [top] + [{str(t): -0.1} for t in tokens[1:]]}


BASE = _answer([1, 2], {"1": -0.2, "7": -1.9})
WITH_A = _answer([3, 4], {"3": -0.3, "8": -1.5})
WITH_B = _answer([5, 6], {"5": -0.4, "9": -1.1})


def test_a_no_adapter_row_answered_with_another_adapter_is_a_mixed_batch_finding():
    measured = Measured()
    alone = [{"a": WITH_A, "b": WITH_B, None: BASE}]
    lora_check._mixed_batch([_Request()], alone, [{"a": WITH_A, "b": WITH_B, None: WITH_B}], "float32", measured)
    assert len(measured.problems) == 2  # its tokens, and its first step
    assert all("the request with no adapter in a batch with adapters a and b answered otherwise than alone" in p
               for p in measured.problems)
    clean = Measured()
    lora_check._mixed_batch([_Request()], alone, [{"a": WITH_A, "b": WITH_B, None: BASE}], "float32", clean)
    assert clean.problems == []


def test_an_adapter_that_does_not_move_vllm_is_not_applied_and_one_too_weak_for_transformers_shows_nothing():
    measured = Measured()
    vllm_side = [{"a": BASE, "b": WITH_B, None: BASE}]
    hf_side = [{"a": WITH_A, "b": WITH_B, None: BASE}]
    lora_check._applied([_Request()], vllm_side, hf_side, measured)
    assert measured.problems == ["image x1: adapter a was not applied: vLLM's first-step top-5 logprobs moved 0.0 nats "
                                 "from the same request without it (transformers + peft: inf)"]
    weak = Measured()
    lora_check._applied([_Request()], vllm_side, [{"a": BASE, "b": WITH_B, None: BASE}], weak)
    assert weak.problems == [] and "adapter a moves transformers' first step by 0.0 nats only" in weak.not_exercised


def test_the_cpu_builds_mixed_batch_finding_is_declared_for_that_build_and_covers_nothing_else():
    for name in ("qwen2_vl", "llava"):
        declared = get_family(name).variants[0].deviations["lora"]
        assert declared.vllm_builds == ("cpu",) and declared.applies("0.24.0", "5.16.1", "cpu")
        assert not declared.applies("0.33.0", "5.20.2", "cpu")  # fixed there (no_lora_mask)
        leak = ("image x1: the request with no adapter in a batch with adapters a and b answered otherwise than alone: "
                "request 0 token 0: generated 715, golden 37")
        assert declared.covers_finding(leak)
        assert not declared.covers_finding("image x1: adapter a was not applied: vLLM's first-step top-5 logprobs moved 0.0")
        assert not declared.covers_finding("image x1: adapter a against transformers + peft: request 0 token 0: moved")


def test_a_declared_finding_makes_the_cell_a_deviation_and_any_other_fails_it(monkeypatch):
    family = get_family("qwen2_vl")
    variant = family.variants[0]
    declared = variant.deviations["lora"]
    monkeypatch.setattr(type(variant), "deviation", lambda self, check: declared if check == "lora" else None)
    leak = "image x1: the request with no adapter in a batch with adapters a and b answered otherwise than alone: x"
    assert cell(family, variant, "cpu_engine.lora", "lora", Measured(problems=[leak])).status is Status.DEVIATION
    other = cell(family, variant, "cpu_engine.lora", "lora",
                 Measured(problems=[leak, "image x1: adapter a against transformers + peft: request 0 token 0: moved"]))
    assert other.status is Status.FAIL


def test_families_without_lora_or_pipeline_support_in_vllm_skip_before_an_engine_starts():
    pytest.importorskip("vllm")
    aria = get_family("aria").variants[0]
    assert "does not support LoRA (it is not SupportsLoRA)" in lora_check.applies(get_family("aria"), aria)
    assert lora_check.applies(get_family("qwen2_vl"), get_family("qwen2_vl").variants[0]) is None
    pp2 = CONFIGURATIONS["pp2"]
    idefics3 = get_family("idefics3")
    assert "does not support pipeline parallelism" in pipeline_applies(idefics3, idefics3.variants[0], pp2)
    assert pipeline_applies(get_family("qwen2_vl"), get_family("qwen2_vl").variants[0], pp2) is None
    assert pipeline_applies(idefics3, idefics3.variants[0], CONFIGURATIONS["chunked"]) is None


class _Metric:
    def __init__(self, name, value):
        self.name, self.value = name, value


class _Engine:
    def __init__(self, values):
        self.values = values

    def get_metrics(self):
        return [_Metric(n, v) for n, v in self.values.items()] + [_Metric("vllm:num_requests_running", 3)]


def test_speculation_counters_are_read_from_vllms_own_metrics():
    found = speculative.counters(_Engine({"vllm:spec_decode_num_drafts": 4, "vllm:spec_decode_num_draft_tokens": 12,
                                          "vllm:spec_decode_num_accepted_tokens": 5}))
    assert found == {"drafts": 4, "draft_tokens": 12, "accepted_tokens": 5}
    assert speculative.counters(_Engine({}))["accepted_tokens"] == 0


def test_the_connector_adapter_targets_the_projector_too_and_the_others_do_not(qwen2_vl_adapters):
    from vlcheck.checkpoints import lora

    family, variant, folder, adapters = qwen2_vl_adapters
    targets = json.loads((adapters["c"] / "adapter_config.json").read_text())["target_modules"]
    assert sorted(t for t in targets if "merger" in t) == ["model.visual.merger.mlp.0", "model.visual.merger.mlp.2"]
    assert not any("blocks" in t for t in targets)  # the vision tower's own layers: not an adapter's
    assert not any("merger" in t for t in json.loads((adapters["a"] / "adapter_config.json").read_text())["target_modules"])
    assert lora_check.adapter_names(CONFIGURATIONS["lora"]) == ("a", "b")
    assert lora_check.adapter_names(CONFIGURATIONS["lora_tower"]) == lora.WITH_CONNECTOR == ("c",)


def test_lora_tower_skips_where_vllms_model_class_takes_no_tower_adapters():
    pytest.importorskip("vllm")
    tower = CONFIGURATIONS["lora_tower"]
    for name in ("qwen2_vl", "llava", "blip-2"):  # their own get_num_mm_encoder_tokens (0.24) / class flag (>= 0.32)
        assert lora_check.applies(get_family(name), get_family(name).variants[0], tower) is None, name
    # vLLM 0.24.0 only checks hasattr(model, "get_num_mm_encoder_tokens"), which SupportsMultiModal's stub
    # satisfies: on 4 H200s mistral3 and minicpmv then crashed at engine start (torch.empty(None)); their
    # classes have no implementation of their own, so the configuration has no path to run there
    for name in ("mistral3", "minicpmv"):
        family = get_family(name)
        why = lora_check.applies(family, family.variants[0], tower)
        assert why is not None and "takes no LoRA on its tower or connector" in why, name
        assert lora_check.applies(family, family.variants[0], CONFIGURATIONS["lora"]) is None, name


@pytest.mark.parametrize(("name", "said"), [
    # what vLLM 0.24.0 said on 4 H200s (2026-11-28), copied from the engines' last words
    ("blip-2", "(EngineCore pid=5349) TypeError: empty() received an invalid combination of arguments - got (float, "
               "device=torch.device, dtype=torch.dtype), but expected one of:"),
    ("paligemma", "(EngineCore pid=5381) ValueError: While loading /tmp/vlcheck-cache/paligemma-fe1b9f6b05de9980-lora-c-"
                  "9a2a782f01f44472, expected target modules in {'out_proj', 'k_proj'} but received "
                  "['multi_modal_projector.linear', 'multi_modal_projector.linear']."),
    ("glm4_1v", "(EngineCore pid=5290) ValueError: While loading /tmp/vlcheck-cache/glm4_1v-7e540a7cb5ce9ce8-lora-c-"
                "2dba70f30c773d62, expected target modules in {'q_proj', 'gate_up_proj'} but received "
                "['visual.merger.gate_proj', 'visual.merger.gate_proj', 'visual.merger.up_proj']."),
])
def test_lora_towers_gpu_findings_are_declared_by_what_vllm_said_and_nothing_else(name, said):
    declared = get_family(name).single.deviation("lora_tower")
    assert declared.covers_finding(said)
    assert not declared.covers_finding("image x1: lora_tower against transformers + peft: token 3 differs")
    assert declared.applies("0.24.0", "5.16.1", "cuda") and not declared.applies("0.33.0", "5.20.2", "cuda")


class _DeadEngineHandle:
    platform = "gpu"


def test_an_engine_that_dies_of_a_declared_finding_is_that_deviation_and_of_another_a_failure(monkeypatch):
    # On the H200s the adapter on paligemma2's connector killed the engine core (EngineDied, its
    # ValueError in the last words): the cell failed, its declaration unread, until run() read the words.
    from vlcheck.configurations import checks
    from vlcheck.engine.watchdog import EngineDied

    said = ("ValueError: While loading /tmp/x-lora-c, expected target modules in {'q_proj'} but received "
            "['multi_modal_projector.linear', 'multi_modal_projector.linear']. Please verify")
    other = "AssertionError"
    paligemma2 = get_family("paligemma2")
    declared = paligemma2.single.deviations["lora_tower"]
    monkeypatch.setattr(type(paligemma2.single), "deviation", lambda self, check: declared if check == "lora_tower" else None)
    for last, status in ((said, Status.DEVIATION), (other, Status.FAIL)):
        def measure(*args, last=last):
            raise EngineDied(f"paligemma2-single: the engine's process EngineCore (pid 7) exited with code 1 during "
                             f"LLM.generate. Its last words (/tmp/e.log):\n(EngineCore pid=7)   File \"x.py\"\n"
                             f"(EngineCore pid=7) {last}")
        monkeypatch.setattr(checks, "_module", lambda config, measure=measure: type("M", (), {"measure": staticmethod(measure)}))
        result = checks.run(CONFIGURATIONS["lora_tower"], paligemma2, paligemma2.single, _DeadEngineHandle())
        assert result.status is status, result.reason
        said_by_cell = result.finding if status is Status.DEVIATION else result.reason  # a deviation keeps what it saw
        assert "exited with code 1 during LLM.generate" in said_by_cell and last.split(":")[0] in said_by_cell
