"""A user's own spec: no vLLM example behind it, the model in a local folder, the template in a
file; what it leaves out comes from the model's config.json and the built-in family serving its
architecture."""

import json
import re
import textwrap

import pytest

from vlcheck.core.results import Status
from vlcheck.cli.main import main
from vlcheck.prompt.assets import Status as AssetStatus, fetch
from vlcheck.prompt.conformance import stop_conformance, template_conformance
from vlcheck.spec.registry import (SPEC_PATH_ENV, SpecError, add_spec_dirs, all_families, default_selection,
                                   get_family, load_spec)
from vlcheck.spec.schema import USER_PROMPT

TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
          "<|image_pad|>", "<|video_pad|>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for p in m['content'] %}"
            "{% if p['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% elif p['type'] == 'text' %}"
            "{{ p['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def model_folder(root, architecture="Qwen2_5_VLForConditionalGeneration", eos=(2, 5)):
    """The small files of a fine-tune's folder (no weights, no tokenizer.json: none is read here)."""
    folder = root / "models" / "my-ft"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture], "model_type": "qwen2_5_vl"}))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>",
        "added_tokens_decoder": {str(i): {"content": t, "special": True} for i, t in enumerate(TOKENS)}}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": list(eos)}))
    return folder


def spec_file(root, body, name="my_ft"):
    specs = root / "specs"
    specs.mkdir(exist_ok=True)
    path = specs / f"{name}.toml"
    path.write_text(f'name = "{name}"\n' + textwrap.dedent(body))
    return path


def test_a_minimal_user_spec_takes_the_rest_from_config_and_base_family(tmp_path):
    model_folder(tmp_path)
    spec = load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n'))
    variant = spec.single
    assert variant.source is None
    assert variant.model == str((tmp_path / "models" / "my-ft").resolve())  # relative to the spec file
    assert variant.architecture == "Qwen2_5_VLForConditionalGeneration"      # from its config.json
    assert spec.base == "qwen2_5_vl"
    builtin = get_family("qwen2_5_vl")
    assert spec.synthetic == builtin.synthetic
    assert variant.modalities == builtin.single.modalities
    assert variant.limit_mm_per_prompt == builtin.single.limit_mm_per_prompt
    assert variant.prompt == USER_PROMPT and variant.engine_args == {}


def test_the_spec_overrides_what_the_base_family_lends(tmp_path):
    model_folder(tmp_path)
    spec = load_spec(spec_file(tmp_path, '''
        base = "qwen2_vl"
        [synthetic]
        model_type = "qwen2_5_vl"
        [single]
        model = "../models/my-ft"
        limit_mm_per_prompt = { image = 2 }
        [single.modalities.image]
        placeholder = "<|vision_start|><|image_pad|><|vision_end|>"
    '''))
    assert spec.base == "qwen2_vl" and spec.synthetic.model_type == "qwen2_5_vl" and spec.synthetic.config == {}
    assert set(spec.single.modalities) == {"image"} and spec.single.limit_mm_per_prompt == {"image": 2}


def test_template_and_chat_template_come_from_files(tmp_path):
    model_folder(tmp_path)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "serve.jinja").write_text(TEMPLATE)
    (tmp_path / "specs" / "hand.txt").write_text("<|im_start|>user\n{placeholder}{question}<|im_end|>\n")
    spec = load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n[single.prompt]\n'
                                         'chat_template_file = "serve.jinja"\n'))
    assert spec.single.prompt.explicit_chat_template == TEMPLATE and spec.single.prompt.chat_template == "tokenizer"
    spec = load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n[single.prompt]\n'
                                         'template_file = "hand.txt"\n'))
    assert spec.single.prompt.template.startswith("<|im_start|>user\n{placeholder}")


@pytest.mark.parametrize("body, field, words", [
    ('[single]\nmodel = "../models/my-ft"\n[single.prompt]\nchat_template_file = "absent.jinja"\n',
     "single.prompt.chat_template_file", "cannot read"),
    ('[single]\nmodel = "../models/my-ft"\n[single.prompt]\ntemplate = "{placeholder}{question}"\n'
     'template_file = "x.txt"\n', "single.prompt.template_file", "set `template` or `template_file`, not both"),
    ('[single]\nmodel = "../models/absent"\n', "single.architecture", "absent: no such folder"),
    ('[single]\nmodel = "../specs"\n', "single.architecture", "its folder has no readable config.json"),
    ('[single]\nmodel = "nobody/not-cached-anywhere"\n', "single.architecture", "not in the HF cache"),
    ('base = "qwen2_5vl"\n[single]\nmodel = "../models/my-ft"\n', "base", "did you mean: qwen2_5_vl"),
    ('[single]\nmodel = "../models/my-ft"\nserve = "vllm serve \'unclosed"\n', "single.serve", "not a command line"),
    ('[single]\nmodel = "../models/my-ft"\nserve = ["vllm", 7]\n', "single.serve", "an array of strings"),
    ('[single]\nmodle = "../models/my-ft"\n', "single.modle", "unknown key (did you mean 'model'?)"),
])
def test_user_spec_errors_name_file_and_field(tmp_path, body, field, words):
    model_folder(tmp_path)
    with pytest.raises(SpecError) as info:
        load_spec(spec_file(tmp_path, body))
    assert info.value.field == field and words in info.value.problem, str(info.value)


def test_an_architecture_no_built_in_family_serves_needs_its_modalities(tmp_path):
    model_folder(tmp_path, architecture="MyOwnVLForCausalLM")
    with pytest.raises(SpecError) as info:
        load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n'))
    assert info.value.field == "single.modalities" and "missing (required)" in info.value.problem
    spec = load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n[single.modalities.image]\n'
                                         'placeholder = "<image>"\n'))
    assert spec.base is None and spec.synthetic is None


def test_serve_line_is_kept_as_arguments(tmp_path):
    model_folder(tmp_path)
    spec = load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n'
                                         'serve = "vllm serve /models/my-ft --max-model-len 8192 --chat-template \'a b.jinja\'"\n'))
    assert spec.single.serve == ("vllm", "serve", "/models/my-ft", "--max-model-len", "8192", "--chat-template", "a b.jinja")


def test_a_model_folder_serves_its_own_files(tmp_path):
    folder = str(model_folder(tmp_path).resolve())
    assert fetch(folder, "config.json").found
    missing = fetch(folder, "chat_template.jinja")
    assert missing.status is AssetStatus.NOT_FOUND and "does not exist (no such file in the model folder)" in missing.why()
    gone = fetch(str(tmp_path / "nowhere"), "config.json")
    assert gone.status is AssetStatus.NOT_FOUND and "the model folder does not exist" in gone.why()


def test_template_and_stops_conform_on_a_model_folder(tmp_path):
    model_folder(tmp_path, eos=(2, 5))
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "serve.jinja").write_text(TEMPLATE)
    body = ('[single]\nmodel = "../models/my-ft"\nstop_token_ids = [5]\n[single.prompt]\nchat_template_file = "serve.jinja"\n'
            '[single.modalities.image]\nplaceholder = "<|image_pad|>"\n')
    spec = load_spec(spec_file(tmp_path, body))
    template = template_conformance(spec, spec.single)
    assert template.status is Status.PASS, template.reason
    assert template.data["single.template_source"] == "explicit (spec)"
    first = template.data["single.rendered"][0][3]
    assert first == ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is the content of this image?"
                     "<|im_end|>\n<|im_start|>assistant\n")
    stops = stop_conformance(spec, spec.single)
    assert stops.status is Status.PASS and stops.data["single.stop_id_tokens"] == {"5": "<|im_end|>"}, stops.reason
    assert stops.data["single.vllm_stop_ids"] == [2, 5] and stops.data["single.model_eos_source"] == "generation_config.json"
    # a stop token the model's tokenizer does not have is a finding
    spec = load_spec(spec_file(tmp_path, body.replace("stop_token_ids = [5]", 'stop_tokens = ["<|eot|>"]')))
    stops = stop_conformance(spec, spec.single)
    assert stops.status is Status.FAIL and "stop token '<|eot|>' is not a token of" in stops.reason, stops.reason


def test_with_user_folders_the_default_selection_is_theirs(tmp_path, monkeypatch):
    model_folder(tmp_path)
    spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n')
    spec_file(tmp_path, '[single]\nmodle = "x"\n', name="broken_one")
    monkeypatch.setenv(SPEC_PATH_ENV, "")
    assert len(default_selection()) == len(all_families()) > 60
    add_spec_dirs([tmp_path / "specs"])
    assert default_selection() == ["broken_one", "my_ft"]
    assert "qwen2_5_vl" in all_families()  # built-in families stay available by name
    with pytest.raises(ValueError, match="no such folder"):
        add_spec_dirs([tmp_path / "absent"])


def test_list_shows_the_specs_that_do_not_load(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(SPEC_PATH_ENV, "")  # --specs sets it
    model_folder(tmp_path)
    spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n')
    spec_file(tmp_path, '[single]\nmodle = "../models/my-ft"\n', name="typo")
    assert main(["list", "--specs", str(tmp_path / "specs")]) == 2
    out = capsys.readouterr().out
    assert re.search(r"^my_ft +/\S+/models/my-ft +image,video", out, re.M), out
    assert "1 families" in out and "1 spec(s) do not load:" in out
    assert re.search(r"typo: \S+typo\.toml: single\.modle: unknown key \(did you mean 'model'\?\)", out), out


def test_render_a_user_spec_on_its_model_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(SPEC_PATH_ENV, "")
    model_folder(tmp_path)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "serve.jinja").write_text(TEMPLATE)
    spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\n[single.prompt]\nchat_template_file = "serve.jinja"\n')
    assert main(["render", "my_ft", "--specs", str(tmp_path / "specs"), "--json", "--question", "Hi?"]) == 0
    prompts = json.loads(capsys.readouterr().out)["prompts"]
    assert prompts == ["<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi?<|im_end|>\n<|im_start|>assistant\n"]


def test_init_writes_a_starter_spec_that_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(SPEC_PATH_ENV, "")
    model_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "models/my-ft", "-o", "specs/"]) == 0
    out = capsys.readouterr().out
    assert "wrote specs/my_ft.toml: it loads: single (image/video), based on qwen2_5_vl" in out, out
    text = (tmp_path / "specs" / "my_ft.toml").read_text()
    assert 'model = "../models/my-ft"' in text and 'base = "qwen2_5_vl"' in text
    # the folder has no chat template: the base family's hand prompt, with the placeholders it goes with
    assert "No chat template found" in text and 'placeholder = "<|image_pad|>"' in text
    assert "# generation_config.json eos_token_id: 2 = '</s>', 5 = '<|im_end|>'\nstop_token_ids = [2, 5]" in text
    spec = load_spec(tmp_path / "specs" / "my_ft.toml")
    assert spec.single.stop_token_ids == (2, 5) and spec.single.source is None
    assert main(["init", "models/my-ft", "-o", "specs/"]) == 2  # never overwrites without --force (usage: 2)
    assert "exists; pass --force" in capsys.readouterr().err


def test_the_gpu_tier_serves_a_model_folder_with_its_own_weights(tmp_path):
    from vlcheck.engine.engines import EngineUnavailable, engine_args

    folder = model_folder(tmp_path)
    spec = load_spec(spec_file(tmp_path, '[single]\nmodel = "../models/my-ft"\nengine_args = { max_model_len = 8192 }\n'))
    with pytest.raises(EngineUnavailable) as info:  # no weights in the folder: `real` cannot run
        engine_args(spec, spec.single, "real")
    assert info.value.skip and "my-ft: its folder holds no weights" in str(info.value)
    (folder / "model.safetensors").write_bytes(b"")
    args, used, model_dir = engine_args(spec, spec.single, "auto")
    assert (used, model_dir, args["model"]) == ("real", str(folder.resolve()), str(folder.resolve()))
    assert args["max_model_len"] == 8192  # the user's engine args, as given
