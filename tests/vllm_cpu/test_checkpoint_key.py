"""The synthetic checkpoint's cache key covers every input of its build: a reference and a
candidate venv sharing one cache must never test one on the other's artifacts."""

import dataclasses

import pytest

from vlcheck.checkpoints import synthetic
from vlcheck.spec.registry import get_family


def _key(spec=None, **kw):
    spec = spec or get_family("llava")
    return synthetic._content_hash(spec, spec.single, spec.synthetic, **{"weights": False, **kw})


@pytest.mark.parametrize(("name", "packages"), [
    ("dots_ocr", {"vllm", "transformers", "tokenizers", "torch"}),  # its recipe names vLLM's DotsOCRConfig
    ("llava", {"transformers", "tokenizers", "torch"}),  # transformers' classes only
])
def test_the_code_of_each_package_the_build_uses_changes_the_key(monkeypatch, name, packages):
    """And only those: a build that runs none of vLLM's code is the same under vLLM's CPU build and its CUDA
    wheel (the reference's CPU engine tier takes its CPU tier's checkpoints)."""
    from vlcheck.core import installed_code

    spec = get_family(name)
    base, installed = _key(spec), synthetic.build_code()
    assert set(installed) == {"vllm", "transformers", "tokenizers", "torch"}
    assert installed == {p: installed_code.identity(p).digest for p in installed} and installed["vllm"] != "absent"
    for package in installed:
        monkeypatch.setattr(synthetic, "build_code", lambda wanted, p=package: {
            name: "other code" if name == p else installed[name] for name in wanted})
        assert (_key(spec) != base) == (package in packages), f"{name}: the key and the code of {package}"


def test_a_build_uses_vllm_where_a_class_it_takes_is_vllms(monkeypatch):
    from vlcheck.adapter import configs

    llava = get_family("llava").synthetic
    assert not synthetic.uses_vllm(llava, None)
    named = dataclasses.replace(llava, processor_class="vllm.transformers_utils.processors.ovis.OvisProcessor")
    assert synthetic.uses_vllm(named, None)
    # vLLM registers config classes it has loaded with transformers' AutoConfig: found there, still vLLM's
    registered = type("RegisteredConfig", (), {"__module__": "vllm.transformers_utils.configs.registered"})
    monkeypatch.setattr(configs, "transformers_config_class", lambda model_type: registered)
    assert synthetic.uses_vllm(llava, None)


def test_a_version_string_is_no_part_of_the_key(monkeypatch):
    """Another release number over the same code (a rebuilt wheel, vLLM's CPU build) is the same build."""
    from importlib import metadata

    base = _key()
    monkeypatch.setattr(metadata, "version", lambda name: "9.9.9")
    assert _key() == base


def test_the_recipe_the_builder_code_and_the_weights_change_the_key(monkeypatch):
    spec = get_family("llava")
    base = _key(spec)
    other_recipe = dataclasses.replace(spec, synthetic=dataclasses.replace(spec.synthetic, tokens=["<extra>"]))
    assert _key(other_recipe) != base
    assert _key(spec, weights="seeded-init") != base and _key(spec, heads=8) != base
    monkeypatch.setattr(synthetic, "BUILDER_HASH", "edited")
    assert _key(spec) != base


def test_the_builder_hash_covers_the_adapter_modules_the_builder_calls():
    names = {p.name for p in synthetic.BUILDER_CODE}
    assert {"synthetic.py", "seeded.py", "hf_classes.py", "configs.py", "numerics.py"} <= names
    assert all(p.exists() for p in synthetic.BUILDER_CODE)


def test_the_video_containers_are_keyed_on_pyavs_code_and_the_writers(monkeypatch):
    pytest.importorskip("av")
    from vlcheck.core import installed_code, video_containers

    spec = video_containers.CONTAINERS[0]
    base = video_containers.cache_key(spec)
    real = installed_code.identity

    def patched(package):
        return dataclasses.replace(real(package), digest="other code") if package == "av" else real(package)

    monkeypatch.setattr(installed_code, "identity", patched)
    assert video_containers.cache_key(spec) != base
    monkeypatch.undo()
    monkeypatch.setattr(video_containers, "WRITER_CODE", "edited")
    assert video_containers.cache_key(spec) != base
