"""`confusable_build` without an engine: the checkpoint its engine is started on is the spec's second
build (seeded, its overrides in config.json and the processor's files), a family without one skips
before any engine, and the proof read from the answering engine's config catches another checkpoint."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from vlcheck.configurations import confusable_build
from vlcheck.configurations.checks import engine_overrides, why_not_applicable
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import CONFIGURATIONS
from vlcheck.engine.engines import EngineUnavailable, engine_args
from vlcheck.spec.registry import get_family

CONFIG = CONFIGURATIONS["confusable_build"]


def args_or_skip(family, **overrides):
    try:
        return engine_args(family, family.single, "auto", platform="cpu", **overrides)
    except EngineUnavailable as err:  # no synthetic checkpoint here (an empty HF cache)
        if not err.skip:
            raise
        pytest.skip(str(err))


def test_its_engine_is_started_on_the_seeded_second_build():
    family = get_family("qwen2_vl")
    overrides = engine_overrides(CONFIG, "cpu")
    assert overrides == {"checkpoint": "confusable"}
    args, used, folder = args_or_skip(family, **overrides)
    _, _, default_folder = args_or_skip(family)
    assert used == "seeded" and folder != default_folder and args["model"] == folder
    config = json.loads((Path(folder) / "config.json").read_text())
    assert config["vision_config"]["temporal_patch_size"] == 3 and config["vision_config"]["spatial_merge_size"] == 2
    default = json.loads((Path(default_folder) / "config.json").read_text())
    assert default["vision_config"]["temporal_patch_size"] == 2
    processor = json.loads((Path(folder) / "processor_config.json").read_text())
    for kind in ("image_processor", "video_processor"):
        assert (processor[kind]["temporal_patch_size"], processor[kind]["merge_size"]) == (3, 2)


def test_a_family_without_a_second_build_skips_before_any_engine():
    llava = get_family("llava")
    assert "no [synthetic.confusable] build" in why_not_applicable(CONFIG, llava, llava.single)
    with pytest.raises(EngineUnavailable, match=r"no \[synthetic.confusable\] build") as raised:
        engine_args(llava, llava.single, "seeded", platform="cpu", checkpoint="confusable")
    assert raised.value.skip
    qwen2_vl = get_family("qwen2_vl")
    assert why_not_applicable(CONFIG, qwen2_vl, qwen2_vl.single) is None


def _handle(temporal_patch_size: int):
    vision = SimpleNamespace(temporal_patch_size=temporal_patch_size, spatial_merge_size=2)
    hf_config = SimpleNamespace(vision_config=vision)
    engine = SimpleNamespace(vllm_config=SimpleNamespace(model_config=SimpleNamespace(hf_config=hf_config)))
    return SimpleNamespace(llm=SimpleNamespace(llm_engine=engine))


def test_the_proof_is_the_answering_engines_config_and_another_checkpoint_is_a_problem():
    family = get_family("qwen2_vl")
    measured = Measured()
    confusable_build.build_proof(family, _handle(3), measured)
    assert measured.proof["engine_config"] == {"vision_config.temporal_patch_size": 3}
    assert measured.problems == []
    measured = Measured()
    confusable_build.build_proof(family, _handle(2), measured)
    assert measured.problems == ["the engine's model config has vision_config.temporal_patch_size = 2, not the "
                                 "build's 3: another checkpoint answered"]


def test_an_engine_start_failure_leads_with_the_root_cause_vllm_wrapped():
    from vlcheck.engine.engines import start_failure

    try:
        try:
            raise ValueError("t:2 must be larger than temporal_factor:3")
        except ValueError as inner:
            raise ValueError("Failed to apply Glm4vProcessor on data={'videos': [[255, 255, 255]]}") from inner
    except ValueError as err:
        said = start_failure(err)
    assert said.startswith("ValueError: t:2 must be larger than temporal_factor:3 (raised as ValueError: Failed to apply")
    assert start_failure(RuntimeError("plain")) == "RuntimeError: plain"
