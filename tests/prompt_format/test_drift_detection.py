"""The drifts seen between vLLM releases are caught: an older seed's prompt against the spec's."""

import json
from pathlib import Path

import pytest

from vlcheck.core.textdiff import describe_difference, first_difference
from vlcheck.prompt.render import fill, render_prompt
from vlcheck.spec.registry import SpecError, get_family, load_spec


def test_line_continuation_whitespace_is_caught():
    spec = get_family("glm4v")
    (drift,) = [d for d in spec.single.drifts if d.kind == "whitespace"]
    placeholder = spec.single.modalities["image"].render(1)
    current = render_prompt(spec, spec.single, "image", "Q")
    old = fill(drift.template, question="Q", placeholder=placeholder)
    at = first_difference(current, old)
    assert at == current.index("Q")  # the 8 stray spaces start where the question should
    report = describe_difference(current, old, "spec", "seed 002")
    assert "first difference at character" in report and '" "' in report


def test_lost_placeholder_is_caught(tmp_path):
    """The h2ovl drift (seed 001 lost `<image>`) put back into the spec is refused when it loads."""
    spec = get_family("h2ovl_chat")
    (drift,) = spec.single.drifts
    assert drift.kind == "placeholder-lost"
    text = Path(spec.path).read_text()
    current = 'content = "{placeholder}\\n{question}"'
    assert current in text
    drifted = tmp_path / "h2ovl_chat.toml"
    drifted.write_text(text.replace(current, f"content = {json.dumps(drift.content)}", 1))
    with pytest.raises(SpecError, match="missing placeholder: no {placeholder} slot for modality 'image'"):
        load_spec(drifted)
