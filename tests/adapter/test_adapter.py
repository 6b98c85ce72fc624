"""The adapter's shims: each picks a generation it knows for the installed vLLM and transformers,
says which, and the processor's cache-on and cache-off paths mean what its docstring says."""

import pytest

from vlcheck import adapter
from vlcheck.adapter import hf_classes
from vlcheck.adapter.processor import CACHE_AT_CREATION, CACHE_PER_CALL, generation_of, hf_processor_sees_text_when_uncached
from vlcheck.core import media
from vlcheck.core.results import SuiteError


def test_every_api_has_a_known_generation_on_this_install():
    picked = adapter.describe()
    assert set(picked) >= {"processor", "auto processor tables", "engine shutdown", "engine cleanup", "chat content format"}
    unknown = {api: g for api, g in picked.items() if g.startswith(("none known", "detection failed"))}
    assert not unknown, f"the adapter has no shim for this install: {unknown}"


def test_processor_generation_is_found_by_signature():
    def create_with_cache(config, *, tokenizer=None, cache=None): ...
    def create_plain(config, *, tokenizer=None): ...
    def call_with_cache(self, prompt, mm_items, hf_processor_mm_kwargs=None, cache=None): ...
    def call_plain(self, prompt, mm_items, hf_processor_mm_kwargs=None): ...

    assert generation_of(create_with_cache, call_plain) == CACHE_AT_CREATION
    assert generation_of(create_plain, call_with_cache) == CACHE_PER_CALL
    with pytest.raises(SuiteError, match="knows no generation of processor"):
        generation_of(create_plain, call_plain)


@pytest.mark.parametrize("entry, name", [
    ("Qwen2VLVideoProcessor", "Qwen2VLVideoProcessor"),  # transformers 5.16 video table
    ({"torchvision": "Qwen2VLVideoProcessor"}, "Qwen2VLVideoProcessor"),  # transformers 5.19 video table
    ({"pil": "LlavaImageProcessorPil", "torchvision": "LlavaImageProcessor"}, "LlavaImageProcessorPil"),
    ({"torchvision": None}, None),  # the backend's package is not installed
    (None, None),
])
def test_auto_table_entries_of_either_generation_give_one_class_name(entry, name):
    assert hf_classes._one_name(entry) == name


def test_video_processor_class_is_a_name_on_this_install():
    classes = hf_classes.processor_classes("qwen2_vl")
    assert classes.processor == "Qwen2VLProcessor" and isinstance(classes.video_processor, str)


def test_processor_cache_paths_differ_only_where_the_hf_processor_sees_the_text():
    """A placeholder typed into LLaVA's question: with the cache, vLLM tokenizes the prompt and
    places the image itself on both generations; without it, vllm 0.24's HF processor sees the
    text and fails on the extra placeholder, while vllm 0.32 takes the cache-on path minus the cache."""
    from vlcheck.checkpoints.synthetic import checkpoint_dir
    from vlcheck.hostile.inputs import prompt_for
    from vlcheck.spec.registry import get_family

    spec = get_family("llava")
    variant = spec.single
    local, args = str(checkpoint_dir(spec, variant)), variant.engine_args_for("image", 1)
    prompt = prompt_for(spec, variant, "image", "What is <image> here?", 1)
    image = {"image": media.image(0)}

    cached = adapter.create_processor(local, args, cached=True)
    served = adapter.apply_processor(cached, prompt, image)
    assert len(served["placeholders"]["image"]) == 1
    cached.clear_cache()
    assert adapter.apply_processor(cached, prompt, image) == served, "a cleared cache must give the same result"

    uncached = adapter.create_processor(local, args, cached=False)
    assert uncached.cache is None
    if hf_processor_sees_text_when_uncached():
        with pytest.raises(ValueError, match="Failed to apply LlavaProcessor"):
            adapter.apply_processor(uncached, prompt, image)
    else:
        assert adapter.apply_processor(uncached, prompt, image) == served


def test_an_api_whose_one_generation_is_gone_is_named_as_unknown(monkeypatch):
    from vlcheck.adapter import generations
    from vlcheck.adapter.generations import picked, single_generation

    monkeypatch.setattr(generations, "_picked", {})  # this test's records stay out of the install's
    assert single_generation("test api", "json", "dumps", "any") == "json.dumps (any)"
    with pytest.raises(SuiteError, match="no generation of test api .*json.no_such_function"):
        single_generation("test api", "json", "no_such_function", "any")
    assert picked()["test api"] == "none known (json.no_such_function)"


def test_vllm_inspects_a_model_class_in_this_process_where_no_gpu_is_visible(tmp_path, monkeypatch):
    """The model-info cache is filled without a subprocess (an import of vLLM each, 8-10 s): with
    subprocesses refused, a cold cache still gets the entry vLLM reads next time."""
    import subprocess

    import torch

    from vlcheck.adapter.models import inspect_in_this_process, model_info

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: vLLM keeps its subprocess, so as not to initialise CUDA here")
    assert inspect_in_this_process()

    run = subprocess.run

    def refused(command, *args, **kwargs):  # vLLM's: [python, -m, vllm.model_executor.models.registry]
        assert "registry" not in " ".join(map(str, command)), f"vLLM inspected the model in a subprocess: {command}"
        return run(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", refused)
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path))
    assert model_info("LlavaForConditionalGeneration").supports_multimodal
    assert list((tmp_path / "modelinfos").glob("*Llava*.json")), "vLLM's cache root moved: no entry written"
