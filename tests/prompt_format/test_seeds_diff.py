"""`vlcheck seeds diff`: an example script read against the specs (families without a spec, specs gone
from it, specs that drifted from it)."""

from pathlib import Path

import pytest

from vlcheck.cli.main import main
from vlcheck.examples import seeds
from vlcheck.examples.seeds_diff import diff, kind_of
from vlcheck.spec.registry import all_families

SCRIPT = '''from typing import NamedTuple, Optional

from vllm import EngineArgs


class ModelRequestData(NamedTuple):
    engine_args: EngineArgs
    prompts: list
    stop_token_ids: Optional[list] = None
    lora_requests: Optional[list] = None


def run_brand_new(questions, modality):
    engine_args = EngineArgs(model="org/brand-new-vl", max_model_len=4096, limit_mm_per_prompt={modality: 1})
    return ModelRequestData(engine_args=engine_args, prompts=[f"<image>{q}" for q in questions])


model_example_map = {"brand_new": run_brand_new}
'''


def test_a_family_without_a_spec_and_specs_gone_from_the_script(tmp_path, capsys):
    script = tmp_path / "vision_language.py"
    script.write_text(SCRIPT)
    found = diff(script, all_families())
    assert found.kind == "single" and found.families == 1 and found.new == ["brand_new"]
    assert "qwen2_vl" in found.gone and not found.drifted and not found.in_sync
    assert main(["seeds", "diff", str(script)]) == 4  # the catalogue lags the script: a finding
    assert "without a spec: brand_new" in capsys.readouterr().out
    assert main(["seeds", "diff", str(tmp_path / "missing.py")]) == 2


def test_the_kind_comes_from_vllms_file_names():
    assert [kind_of(Path(n)) for n in ("vision_language.py", "vision_language_multi_image.py", "audio_language.py")] == [
        "single", "multi_image", "audio"]


def test_the_newer_examples_show_the_drift_the_issue_measured():
    newer = seeds.seeds_dir() / "newer"
    if not (newer / "vision_language.py").is_file():
        pytest.skip(f"no newer example scripts in {newer} (VLCHECK_SEEDS_DIR)")
    families = all_families()
    single = diff(newer / "vision_language.py", families)
    # the nine vision families the newer example adds (issue 55), until their specs exist
    assert {"molmo2", "paddleocr_vl", "bagel", "eagle2_5", "glm_ocr", "kanana_v", "lfm2_vl", "openpangu_vl",
            "stepvl"} - set(families) <= set(single.new)
    if "aya_vision" in single.drifted:  # the repo moved to CohereLabs
        assert any("CohereLabs/aya-vision-8b" in p for p in single.drifted["aya_vision"])
    multi = diff(newer / "vision_language_multi_image.py", families)
    assert any("example sends 12 images" in p for ps in multi.drifted.values() for p in ps)
    audio = diff(newer / "audio_language.py", families)
    # every audio example has its spec's `audio` variant but voxtral's (the Mistral format: token ids from
    # mistral_common, no prompt string), and each follows its example
    assert audio.kind == "audio" and audio.new == ["voxtral"] and not audio.drifted and len(audio.unchanged) == 11
