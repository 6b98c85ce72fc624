"""`error` against `fail`, by construction: an exception raised in vlcheck's own code (its adapter,
its checkpoint builder, a check) makes the cell `error`, never `fail`; one raised by vLLM or
transformers is their behaviour: `fail`. One rule decides (`core.results.raised_by`), in the
report and in pytest alike. Each plant below is an AttributeError raised inside vlcheck's code, as
when a vLLM release renames what vlcheck reads."""

import dataclasses
import json
import types
from pathlib import Path

import pytest

from vlcheck.core.results import Status, from_exception, raised_by
from vlcheck.cli import main as cli
from vlcheck.gate.checks import CATALOGUE, run_cell, run_variant
from vlcheck.spec.registry import get_family, load_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "specs"


def test_an_attribute_error_in_the_adapter_is_an_error(monkeypatch):
    """The adapter reading an attribute its processor object does not have (as when vLLM renames
    one): raised in the adapter's own frame, the processor check errors."""
    from vlcheck.adapter import processor

    monkeypatch.setattr(processor, "Processor", lambda *args, **kwargs: types.SimpleNamespace())
    spec = get_family("llava")
    result = run_variant(CATALOGUE["processor"], spec, spec.single)
    assert result.status is Status.ERROR, result
    assert "vlcheck crashed (not a vLLM finding): AttributeError" in result.reason


def test_an_attribute_error_in_the_checkpoint_builder_is_an_error(monkeypatch, tmp_path):
    """A recipe object missing what the builder reads: every check that needs the checkpoint errors."""
    monkeypatch.setenv("VLCHECK_CACHE", str(tmp_path))  # nothing cached: the builder runs
    spec = get_family("llava")
    broken = dataclasses.replace(spec, synthetic=types.SimpleNamespace(unsupported=None))
    for check in ("processor", "fingerprints", "placement", "hostile"):
        result = run_variant(CATALOGUE[check], broken, broken.single)
        assert result.status is Status.ERROR, (check, result)
        assert "AttributeError" in result.reason, (check, result.reason)


def test_an_attribute_error_in_a_check_is_an_error_in_the_report(monkeypatch, tmp_path, capsys):
    """A check reading an adapter function that is not there: `vlcheck check` writes an error
    cell and exits 3 (vlcheck could not run it), never 4 (a failure)."""
    from vlcheck.cpu import vllm_checks

    monkeypatch.setattr(vllm_checks, "adapter", types.SimpleNamespace())
    out = tmp_path / "r.json"
    code = cli.main(["check", "--family", "llava", "--check", "architecture", "--json", str(out)])
    cell = json.loads(out.read_text())["families"]["llava"]["checks"]["architecture"]
    assert code == 3 and cell["status"] == "error", cell
    assert "AttributeError" in cell["reason"] and "could not run" in capsys.readouterr().out


def test_a_genuine_vllm_rejection_is_a_failure():
    """vLLM's processor refusing a prompt without its placeholder: `fail`, naming the item."""
    spec = load_spec(FIXTURES / "qwen2_vl_no_placeholder.toml")
    result = run_cell(CATALOGUE["processor"], spec)
    assert result.status is Status.FAIL, result
    assert "image item 0: the prompt has 0 placeholder(s)" in result.reason


def test_who_raised_an_exception_decides():
    from vllm import SamplingParams

    with pytest.raises(Exception) as vllms:
        SamplingParams(temperature=-1.0)
    assert raised_by(vllms.value) == "vllm"
    assert from_exception("llava", "engine_args", vllms.value).status is Status.FAIL
    from vlcheck import adapter
    from vlcheck.checkpoints.synthetic import checkpoint_dir

    spec = get_family("llava")
    with pytest.raises(Exception) as validation:  # vLLM's config validators, raised from pydantic's frames
        adapter.create_processor(str(checkpoint_dir(spec, spec.single)), {"dtype": "not-a-dtype"})
    assert raised_by(validation.value) == "vllm"
    with pytest.raises(AttributeError) as ours:
        types.SimpleNamespace().missing
    assert raised_by(ours.value) == "vlcheck"  # the repository's tests are vlcheck's code too
    assert from_exception("llava", "engine_args", ours.value).status is Status.ERROR


def test_a_pydantic_validation_error_says_what_failed_not_only_its_header():
    # vLLM 0.33.0's ModelConfig in CI: five families' cells read "ValidationError: 1 validation error for ModelConfig"
    import pydantic

    class ModelConfig(pydantic.BaseModel):
        model: str

        @pydantic.field_validator("model")
        @classmethod
        def inspect(cls, value):
            raise ValueError("Model architectures ['Glm4vForConditionalGeneration'] failed to be inspected")

    with pytest.raises(pydantic.ValidationError) as raised:
        ModelConfig(model="a-checkpoint")
    reason = from_exception("glm4_1v", "processor", raised.value).reason
    assert "raised ValidationError: 1 validation error for ModelConfig | model | " in reason
    assert "failed to be inspected" in reason and "For further information" not in reason
