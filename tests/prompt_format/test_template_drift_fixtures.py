"""Drifted hand templates (test fixture specs) fail template conformance with a pointed diff."""

from pathlib import Path

import pytest

from vlcheck.core.results import Status
from vlcheck.prompt.assets import fetch
from vlcheck.prompt.conformance import template_conformance
from vlcheck.spec.registry import load_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "specs"


def _load(name):
    spec = load_spec(FIXTURES / f"{name}.toml")
    asset = fetch(spec.single.model, "chat_template.jinja")
    if not asset.found:
        pytest.skip(asset.why())
    return spec


def test_drifted_template_fails_at_first_differing_character():
    spec = _load("llava_drifted")
    result = template_conformance(spec, spec.single)
    assert result.status is Status.FAIL
    assert "deviations.template" in result.reason
    # "USER: <image>\nWhat is the content of this image?" then the example's second space.
    at = len("USER: <image>\nWhat is the content of this image? ")
    assert f"first difference at character {at} (example has \" \", template has \"A\")" in result.details[0]


def test_undeclared_whitespace_change_is_caught():
    spec = _load("qwen2_vl_whitespace")
    result = template_conformance(spec, spec.single)
    assert result.status is Status.FAIL
    at = len("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user")
    assert f"first difference at character {at} (example has \" \", template has \"\\n\")" in result.details[0]
