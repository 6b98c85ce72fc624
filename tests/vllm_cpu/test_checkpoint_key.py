"""The synthetic checkpoint's cache key covers every input of its build: a reference and a
candidate venv sharing one cache must never test one on the other's artifacts."""

import dataclasses

from vlcheck.checkpoints import synthetic
from vlcheck.spec.registry import get_family


def _key(spec=None, **kw):
    spec = spec or get_family("llava")
    return synthetic._content_hash(spec, spec.single, spec.synthetic, **{"weights": False, **kw})


def test_each_package_version_the_build_uses_changes_the_key(monkeypatch):
    base, installed = _key(), synthetic.build_versions()
    assert set(installed) == {"vllm", "transformers", "tokenizers", "torch"} and installed["vllm"]
    for package in installed:
        monkeypatch.setattr(synthetic, "build_versions", lambda p=package: {**installed, p: "0.0.0-other"})
        assert _key() != base, f"the checkpoint key ignores the {package} version"


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
