"""Where vLLM's ModelConfig says only that an architecture "failed to be inspected", the processor
check names what importing the model class raised: on CI's candidate five families' cells read the
pydantic header alone, and the cause was `cuda.bindings.runtime` without `cudaLibrary_t` (a file
installed by two distributions)."""

import pytest

from vlcheck.adapter import models, processor

UNINSPECTED = ("1 validation error for ModelConfig\n  Value error, Model architectures "
               "['Glm4vForConditionalGeneration'] failed to be inspected. Please check the logs for more details.")


@pytest.fixture
def checkpoint(tmp_path, monkeypatch):
    """A checkpoint whose architecture vLLM's ModelConfig names as not inspected."""
    def uninspectable(**kwargs):
        raise ValueError(UNINSPECTED)

    monkeypatch.setattr("vllm.config.ModelConfig", uninspectable)
    models.class_import_error.cache_clear()
    yield str(tmp_path)
    models.class_import_error.cache_clear()


def test_the_model_class_import_error_is_what_the_processor_raises(checkpoint, monkeypatch):
    imported = []

    def load(arch):
        imported.append(arch)
        raise AttributeError("module 'cuda.bindings.runtime' has no attribute 'cudaLibrary_t'")

    monkeypatch.setattr(models, "load_model_class", load)
    with pytest.raises(processor.NotInspected) as raised:
        processor.create_processor(checkpoint, {})
    assert imported == ["Glm4vForConditionalGeneration"]
    assert str(raised.value) == ("vLLM could not inspect Glm4vForConditionalGeneration: importing its class raised "
                                 "AttributeError: module 'cuda.bindings.runtime' has no attribute 'cudaLibrary_t'")
    assert raised.value.__suppress_context__  # pydantic's frames are not where it went wrong
    assert any(tb.tb_frame.f_code.co_name == "load" for tb in _tracebacks(raised.value))  # the import's frames
    with pytest.raises(processor.NotInspected, match="cudaLibrary_t"):  # every check of the family asks again
        processor.create_processor(checkpoint, {})
    assert imported == ["Glm4vForConditionalGeneration"]  # the import ran once


def test_a_name_transformers_removed_is_a_failure_not_a_missing_package(checkpoint, monkeypatch):
    # the checks read an ImportError from create_processor as an optional package not installed (skip)
    def load(arch):
        raise ImportError("cannot import name 'PixtralRotaryEmbedding' from 'transformers.models.pixtral'")

    monkeypatch.setattr(models, "load_model_class", load)
    with pytest.raises(processor.NotInspected, match="PixtralRotaryEmbedding") as raised:
        processor.create_processor(checkpoint, {})
    assert not isinstance(raised.value, ImportError)


def _tracebacks(err):
    tb = err.__traceback__
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_where_the_class_imports_here_vllms_own_error_stands(checkpoint, monkeypatch):
    monkeypatch.setattr(models, "load_model_class", lambda arch: object)
    with pytest.raises(ValueError, match="failed to be inspected"):
        processor.create_processor(checkpoint, {})
