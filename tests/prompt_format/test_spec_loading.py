"""Spec files are validated on load, and every error names the file and the field."""

import textwrap

import pytest

from vlcheck.spec.registry import SpecError, UnknownFamily, get_family, load_spec

GOOD = """
name = "{name}"

[single]
source = {{ seed = "000", function = "run_x" }}
model = "org/model"
architecture = "LlavaForConditionalGeneration"
limit_mm_per_prompt = "one per modality"
engine_args = {{ max_model_len = 4096 }}

[single.prompt]
template = "USER: {{placeholder}}\\n{{question}}\\nASSISTANT:"

[single.modalities.image]
placeholder = "<image>"
"""


def write(tmp_path, text, name="fam"):
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path, text, name="fam") -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text, name))
    return info.value


def test_good_spec_loads(tmp_path):
    spec = load_spec(write(tmp_path, GOOD.format(name="fam")))
    assert spec.single.engine_args_for("image") == {
        "model": "org/model", "max_model_len": 4096, "limit_mm_per_prompt": {"image": 1}}


@pytest.mark.parametrize("change, field, words", [
    (("max_model_len = 4096", "max_model_len = 4096, max_num_seqs = true"), None, None),  # bool is allowed in engine args
    (('model = "org/model"', 'model = "org/model"\nmodle = "x"'), "single.modle", "unknown key (did you mean 'model'?)"),
    (('model = "org/model"', 'modle = "org/model"'), "single.modle", "unknown key (did you mean 'model'?)"),
    (('model = "org/model"', "model = 7"), "single.model", "expected a string, got an integer"),
    (("[single.modalities.image]", "[single.modalities.smell]"), "single.modalities.smell", "unknown modality"),
    (("[single.modalities.image]", "[single.modalities.audio]"), "single.modalities",
     "the `audio` variant (audio_language.py's example) has exactly the `audio` modality"),
    (("{{placeholder}}", ""), "single.prompt.template", "missing placeholder: no {placeholder} slot for modality 'image'"),
    (('placeholder = "<image>"', ""), "single.modalities.image.placeholder", "missing placeholder"),
    (("{{question}}", "{{questoin}}"), "single.prompt.template", "unknown slot {questoin}"),
    (('limit_mm_per_prompt = "one per modality"', 'limit_mm_per_prompt = "one"'), "single.limit_mm_per_prompt", "expected"),
    (("engine_args = {{ max_model_len = 4096 }}", 'engine_args = {{ model = "x" }}'), "single.engine_args.model", "set `model` on the variant"),
    (('placeholder = "<image>"', 'placeholder = "<image>"\n[single.known_broken."1x1 imgae"]\nreason = "x"\n'
      'vllm = "==0.24.0"\ntransformers = "==5.16.1"'),
     "single.known_broken.1x1 imgae", "unknown hostile-input case (did you mean '1x1 image'?)"),
    (('placeholder = "<image>"', 'placeholder = "<image>"\n[single.deviations.templat]\nreason = "x"\n'
      'vllm = "==0.24.0"\ntransformers = "==5.16.1"'),
     "single.deviations.templat", "unknown check; checks are engine_args, architecture, template"),
    (('placeholder = "<image>"', 'placeholder = "<image>"\n[single.deviations]\ntemplate = "no versions"'),
     "single.deviations.template", "expected a table: reason = "),
    (('placeholder = "<image>"', 'placeholder = "<image>"\n[single.deviations.template]\nreason = "x"\nvllm = "==0.24.0"'),
     "single.deviations.template.transformers", "missing (required)"),
    (('placeholder = "<image>"', 'placeholder = "<image>"\n[single.deviations.template]\nreason = "x"\n'
      'vllm = "0.24 or newer"\ntransformers = "==5.16.1"'),
     "single.deviations.template.vllm", "not a version range"),
])
def test_errors_name_file_and_field(tmp_path, change, field, words):
    old, new = change
    text = GOOD.replace(old, new).format(name="fam")
    if field is None:
        load_spec(write(tmp_path, text))
        return
    err = error_of(tmp_path, text)
    assert err.path.endswith("fam.toml") and err.field == field
    assert words in err.problem
    assert str(err).startswith(f"{err.path}: {field}: ")


def test_name_must_match_file(tmp_path):
    err = error_of(tmp_path, GOOD.format(name="other"), name="fam")
    assert err.field == "name" and "file name" in err.problem


def test_toml_syntax_error_names_file(tmp_path):
    err = error_of(tmp_path, "name = \n")
    assert err.field == "(syntax)" and err.path.endswith("fam.toml")


def test_unknown_family_suggests_close_names():
    with pytest.raises(UnknownFamily) as info:
        get_family("qwen2_5vl")
    assert "qwen2_5_vl" in info.value.close
    assert "vlcheck list" in str(info.value)
