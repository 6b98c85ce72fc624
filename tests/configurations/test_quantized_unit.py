"""The quantized-checkpoint configurations without an engine: what compressed-tensors writes over a
seeded checkpoint (the language model quantized, everything else in the ignore list, the unquantized
weights untouched, built once), and the cell's proof on fabricated loaded layers (a vision tower or
projector that runs quantized is a problem; a language model that does not is a path not exercised)."""

import json
from types import SimpleNamespace

import pytest

from vlcheck.configurations import quantized as quantized_check
from vlcheck.configurations.checks import engine_overrides
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import CONFIGURATIONS, select
from vlcheck.spec.registry import get_family

pytest.importorskip("compressed_tensors")


@pytest.fixture(scope="module")
def qwen2_vl_w4a16():
    from vlcheck.checkpoints import quantized
    from vlcheck.checkpoints.synthetic import checkpoint_dir

    family = get_family("qwen2_vl")
    variant = family.variants[0]
    seeded = checkpoint_dir(family, variant, weights=True)
    return seeded, quantized.quantized_dir(seeded, variant.architecture, "w4a16")


def test_the_language_model_is_quantized_and_everything_else_is_in_the_ignore_list(qwen2_vl_w4a16):
    from safetensors import safe_open

    from vlcheck.checkpoints import quantized

    seeded, folder = qwen2_vl_w4a16
    config = json.loads((folder / "config.json").read_text())["quantization_config"]
    assert config["quant_method"] == "compressed-tensors" and config["format"] == "pack-quantized"
    (group,) = config["config_groups"].values()
    assert group["targets"] == ["Linear"]  # as releases write it: every Linear but the ignored ones
    assert group["weights"]["num_bits"] == 4 and group["weights"]["group_size"] == quantized.GROUP_SIZE
    ignore = config["ignore"]
    assert "lm_head" in ignore and any(".visual." in n or n.startswith("model.visual") for n in ignore)
    assert any("merger" in n for n in ignore) and not any("language_model" in n for n in ignore)
    written = json.loads((folder / quantized.MARKER).read_text())["quantized"]
    assert written and all("language_model" in n for n in written)
    with safe_open(str(folder / "model.safetensors"), "pt") as q, safe_open(str(seeded / "model.safetensors"), "pt") as s:
        packed = [k for k in q.keys() if k.endswith(".weight_packed")]
        assert len(packed) == len(written)  # one packed int4 weight per quantized layer
        vision = [k for k in s.keys() if "visual" in k and k.endswith(".weight")]
        assert vision and all(q.get_tensor(k).equal(s.get_tensor(k)) for k in vision)  # the tower as it was


def test_a_checkpoint_is_built_once_per_content(qwen2_vl_w4a16):
    from vlcheck.checkpoints import quantized

    seeded, folder = qwen2_vl_w4a16
    stamp = (folder / quantized.MARKER).stat().st_mtime_ns
    assert quantized.quantized_dir(seeded, get_family("qwen2_vl").variants[0].architecture, "w4a16") == folder
    assert (folder / quantized.MARKER).stat().st_mtime_ns == stamp
    assert quantized.quantized_dir(seeded, get_family("qwen2_vl").variants[0].architecture, "w8a8") != folder


class Workers:
    def __init__(self, parts):
        self.parts = parts

    def apply_model(self, fn):
        return [self.parts]


def test_the_proof_is_the_loaded_layers_per_part():
    ok = Measured()
    quantized_check.checkpoint_proof(SimpleNamespace(llm=Workers({
        "language_model": {"CompressedTensorsLinearMethod/CompressedTensorsWNA16/MarlinLinearKernel": 8},
        "vision": {"UnquantizedLinearMethod": 4}, "projector": {"UnquantizedLinearMethod": 2}})), "w4a16", ok)
    assert ok.problems == [] and ok.not_exercised is None and ok.facts["quantized_parts"] == ["language_model"]

    tower = Measured()  # the ignore list was not applied to the tower: its unquantized weights run as int8
    quantized_check.checkpoint_proof(SimpleNamespace(llm=Workers({
        "language_model": {"CompressedTensorsLinearMethod/CompressedTensorsW8A8Int8": 8},
        "vision": {"CompressedTensorsLinearMethod/CompressedTensorsW8A8Int8": 4}})), "w8a8", tower)
    assert tower.problems and tower.problems[0].startswith("the vision's linear layers run")

    none = Measured()
    quantized_check.checkpoint_proof(SimpleNamespace(llm=Workers({"language_model": {"UnquantizedLinearMethod": 8}})),
                                     "w8a8", none)
    assert "no linear layer of the language model runs a quantized method" in none.not_exercised


def test_one_configuration_per_format_starts_the_quantized_checkpoint_in_bfloat16():
    from vlcheck.checkpoints.quantized import FORMATS

    for name in FORMATS:
        config = CONFIGURATIONS[f"quant_{name}"]
        # its core apart: what ran before in the test process moved a bfloat16 quantized engine's answers
        assert engine_overrides(config, "cpu") == {"dtype": "bfloat16", "checkpoint": f"quant:{name}", "core_apart": True}
    cpu = {c.name for c in select(["all"], "cpu")}
    assert "quant_w8a16" not in cpu and "quant_w4a16" in cpu  # no 8-bit weight-only kernel on vLLM's CPU build


def test_real_weights_have_no_quantized_checkpoint_of_vlchecks():
    from vlcheck.engine import engines

    qwen = get_family("qwen2_vl")
    with pytest.raises(engines.EngineUnavailable, match="written over the seeded weights"):
        engines.engine_args(qwen, qwen.single, "real", checkpoint="quant:w4a16")
    with pytest.raises(ValueError, match="quant:FORMAT"):
        engines.engine_args(qwen, qwen.single, "seeded", checkpoint="quantized")
