"""`vlcheck plant` against the installed vLLM's own source (copied, never edited in place): each
plant finds its line in the reference vLLM, leaves valid Python, and `--undo` restores the file."""

import ast
import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest

from vlcheck.runners import plant


@pytest.fixture
def vllm_copy(tmp_path):
    """models_dir() of a copy of the installed vLLM's files the plants edit."""
    spec = importlib.util.find_spec("vllm")
    if spec is None:
        pytest.skip("vLLM is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    models = tmp_path / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    for _, (file, _) in plant.PROJECTOR.items():
        shutil.copy(root / "model_executor" / "models" / file, models / file)
    shutil.copy(root / "model_executor" / "models" / plant.COMPILED_ONLY[0], models / plant.COMPILED_ONLY[0])
    runner = tmp_path / "vllm" / plant.RUNNER[0]
    runner.parent.mkdir(parents=True)
    shutil.copy(root / plant.RUNNER[0], runner)
    processing = tmp_path / "vllm" / plant.SLOW_PROCESSOR[0]
    processing.parent.mkdir(parents=True)
    shutil.copy(root / plant.SLOW_PROCESSOR[0], processing)
    renderer = tmp_path / "vllm" / plant.SLOW_RENDER[0]
    renderer.parent.mkdir(parents=True)
    shutil.copy(root / plant.SLOW_RENDER[0], renderer)
    manager = tmp_path / "vllm" / plant.LORA_SKIP[0]
    manager.parent.mkdir(parents=True)
    shutil.copy(root / plant.LORA_SKIP[0], manager)
    for file, _, _ in plant.QUANT_IGNORE_UNMAPPED:
        (tmp_path / "vllm" / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / file, tmp_path / "vllm" / file)
    shutil.copy(root / plant.VIDEO_FRAMES[0], tmp_path / "vllm" / plant.VIDEO_FRAMES[0])
    shutil.copy(root / plant.IMAGE_SIZE_SWAPPED[0], tmp_path / "vllm" / plant.IMAGE_SIZE_SWAPPED[0])
    return models


@pytest.mark.parametrize("name", ["graphs-drop-media", "compiled-only", "projector:qwen2_vl", "slow-processor:qwen2_vl",
                                  "slow-render:qwen2_vl", "lora-skips-language-model:llava", "video-frames:qwen2_vl",
                                  "image-size-swapped", "merge-size-confused", "mrope-merge-confused"])
def test_a_plant_edits_the_reference_vllms_line_into_valid_python_and_undo_restores_it(vllm_copy, name):
    files = {p: p.read_text() for p in vllm_copy.parent.parent.rglob("*.py")}
    plant.plant(name, vllm_copy)
    changed = [p for p, text in files.items() if p.read_text() != text]
    assert len(changed) == 1
    ast.parse(changed[0].read_text())  # still Python
    assert "vlcheck plant" in changed[0].read_text()
    plant.undo(vllm_copy)
    assert all(p.read_text() == text for p, text in files.items())
    assert not list(vllm_copy.parent.parent.rglob(f"*{plant.ORIG}"))


def test_graphs_drop_media_acts_only_on_graph_replayed_steps_with_encoder_inputs():
    # what the plant adds after the model runner's _preprocess call: one `if`, guarded by both conditions
    added = textwrap.dedent(plant.RUNNER[2][len(plant.RUNNER[1]):])
    (block,) = ast.parse(added).body
    assert isinstance(block, ast.If)
    guard = ast.unparse(block.test)
    assert "cudagraph_mode != CUDAGraphMode.NONE" in guard and "scheduler_output.scheduled_encoder_inputs" in guard
    assert plant.RUNNER[2].startswith(plant.RUNNER[1])  # the anchor itself is kept as it was


def test_slow_processor_sleeps_for_its_family_only(vllm_copy):
    plant.plant("slow-processor:llava-next-video", vllm_copy)
    planted = (vllm_copy.parent.parent / plant.SLOW_PROCESSOR[0]).read_text()
    assert "hf_config.model_type == 'llava_next_video':" in planted  # the config's model_type, not the family's name
    assert f"sleep({plant.SLOWDOWN} * (" in planted
    plant.undo(vllm_copy)
    with pytest.raises(plant.PlantError, match="no such family"):
        plant.plant("slow-processor:no_such_family", vllm_copy)


def test_slow_render_times_each_chat_renderer_from_its_start_and_sleeps_for_its_family_only(vllm_copy):
    plant.plant("slow-render:qwen2_vl", vllm_copy)
    planted = (vllm_copy.parent.parent / plant.SLOW_RENDER[0]).read_text()
    # render_messages and render_messages_async alike: each starts its clock and sleeps before it returns
    assert planted.count("_planted_start = ") == 2 and planted.count("hf_config.model_type == 'qwen2_vl':") == 2
    tree = ast.parse(planted)
    for name in ("render_messages", "render_messages_async"):
        (function,) = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
        body = ast.get_source_segment(planted, function)
        assert body.index("_planted_start = ") < body.index("sleep(") < body.rindex("return conversation, prompt")
    plant.undo(vllm_copy)


def test_the_lora_plant_acts_on_the_familys_architecture_only(vllm_copy):
    plant.plant("lora-skips-language-model:llava", vllm_copy)
    planted = (vllm_copy.parent.parent / plant.LORA_SKIP[0]).read_text()
    assert "if type(self.model).__name__ == 'LlavaForConditionalGeneration' and \"language_model\" in module_name:" in planted
    with pytest.raises(plant.PlantError, match="no such family"):
        plant.plant("lora-skips-language-model:nope", vllm_copy)
    plant.undo(vllm_copy)


def test_the_quantized_ignore_list_plant_skips_the_name_mapping_for_the_familys_architecture_only(vllm_copy):
    files = {p: p.read_text() for p in vllm_copy.parent.parent.rglob("*.py")}
    plant.plant("quant-ignore-unmapped:llava", vllm_copy)
    changed = sorted(str(p.relative_to(vllm_copy.parent.parent)) for p, text in files.items() if p.read_text() != text)
    assert changed == sorted(f for f, _, _ in plant.QUANT_IGNORE_UNMAPPED)  # both places vLLM maps a quant config
    loader = (vllm_copy.parent.parent / plant.QUANT_IGNORE_UNMAPPED[0][0]).read_text()
    assert "if hf_to_vllm_mapper is not None and model_class.__name__ != 'LlavaForConditionalGeneration':" in loader
    for path in changed:
        ast.parse((vllm_copy.parent.parent / path).read_text())
    plant.undo(vllm_copy)
    assert all(p.read_text() == text for p, text in files.items())
