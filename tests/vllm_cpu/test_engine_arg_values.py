"""Engine arg VALUES against the values the installed vLLM allows (`adapter.engine_arg_values`):
`Literal` and enum types of EngineArgs fields, the `choices=` of vLLM's CLI parser, and the
tokenizer-mode registry. No network, no GPU."""

import enum
import json
import typing
from pathlib import Path

import pytest

from vlcheck import adapter
from vlcheck.adapter.engine import REGISTRIES, AllowedValues, cli_choices, closed_values, literal_members
from vlcheck.core.results import Status
from vlcheck.cpu.vllm_checks import engine_args_check
from vlcheck.spec.registry import BUILTIN_SPEC_DIR, load_spec

SPECS = BUILTIN_SPEC_DIR


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # str, int, float


def spec_with(tmp_path: Path, **engine_args):
    """A one-variant Qwen2-VL spec passing these engine args (besides max_model_len)."""
    args = ", ".join(f"{k} = {_toml(v)}" for k, v in {"max_model_len": 4096, **engine_args}.items())
    path = tmp_path / "qwen2_vl_values.toml"
    path.write_text(f'''name = "qwen2_vl_values"

[single]
source = {{ seed = "002", function = "run_qwen2_vl" }}
model = "Qwen/Qwen2-VL-7B-Instruct"
architecture = "Qwen2VLForConditionalGeneration"
limit_mm_per_prompt = "one per modality"
engine_args = {{ {args} }}

[single.prompt]
template = "<|im_start|>user\\n<|vision_start|>{{placeholder}}<|vision_end|>{{question}}<|im_end|>\\n<|im_start|>assistant\\n"

[single.modalities.image]
placeholder = "<|image_pad|>"
''')
    spec = load_spec(path)
    return engine_args_check(spec, spec.single)


def _field(predicate) -> str:
    """An EngineArgs field of the installed vLLM that `predicate(name, type, allowed)` picks."""
    types, values = adapter.engine_arg_types(), adapter.engine_arg_values()
    found = next((n for n in sorted(values) if predicate(n, types[n], values[n])), None)
    if found is None:
        pytest.skip("the installed vLLM has no such field")
    return found


# --- the generic introspection, on types of our own ---------------------------------------------

class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@pytest.mark.parametrize("tp, expected", [
    (typing.Literal["a", "b"], ("a", "b")),
    (typing.Literal["a", "b"] | None, ("a", "b")),
    (typing.Optional[typing.Literal["a"]], ("a",)),
    (list[typing.Literal["x", "y"]] | None, ("x", "y")),
    (Colour, ("RED", "GREEN")),
    (Colour | None, ("RED", "GREEN")),
    (typing.Literal["a"] | str, None),  # any string: open
    (typing.Literal[1, 2] | int, None),
    (str, None),
    (int, None),
    (bool, None),
    (dict[str, int], None),
])
def test_closed_values(tp, expected):
    found = closed_values(tp)
    assert (found.values if found else None) == expected


def test_enum_names_any_case_and_bools_are_not_ints():
    assert closed_values(Colour).allows("red") and closed_values(Colour).allows("GREEN")
    assert not closed_values(Colour).allows("blue")
    ranks = AllowedValues((1, 8, 16))
    assert ranks.allows(8) and not ranks.allows(True) and not ranks.allows("8")
    assert literal_members(typing.Literal["auto", "hf"] | str) == ("auto", "hf")


# --- the installed vLLM ---------------------------------------------------------------------------

def test_literal_field_bad_value_fails_naming_the_allowed_values(tmp_path):
    members = literal_members(adapter.engine_arg_types()["dtype"])
    assert "bfloat16" in members  # vLLM types dtype as a Literal (ModelDType)
    result = spec_with(tmp_path, dtype="bf16")
    assert result.status is Status.FAIL
    assert result.reason.startswith(f"[single] qwen2_vl_values: engine arg dtype='bf16' is not one of vllm "
                                    f"{adapter.version()}'s allowed values: ")
    for member in members:
        assert repr(member) in result.reason


def test_literal_field_good_value_passes(tmp_path):
    result = spec_with(tmp_path, dtype="bfloat16")
    assert result.status is Status.PASS, result.reason


def test_field_closed_only_by_the_cli_parser(tmp_path):
    """A field EngineArgs types as any string, whose flag vLLM's parser gives choices (from the
    config dataclass field it maps to, or listed by hand)."""
    types = adapter.engine_arg_types()
    name = _field(lambda n, tp, allowed: closed_values(tp) is None and n in cli_choices()
                  and n not in REGISTRIES and all(isinstance(c, str) for c in allowed.values))
    good = cli_choices()[name][0]
    assert spec_with(tmp_path, **{name: good}).status is Status.PASS
    bad = spec_with(tmp_path, **{name: "no-such-choice"})
    assert bad.status is Status.FAIL
    assert f"engine arg {name}='no-such-choice' is not one of vllm" in bad.reason, (name, types[name])
    assert repr(good) in bad.reason


def test_enum_field_takes_member_names(tmp_path):
    name = _field(lambda n, tp, allowed: allowed.any_case and n in ("mamba_backend", "attention_backend"))
    member = adapter.engine_arg_values()[name].values[0]
    assert spec_with(tmp_path, **{name: member.lower()}).status is Status.PASS
    bad = spec_with(tmp_path, **{name: "no_such_backend"})
    assert bad.status is Status.FAIL and "is not one of vllm" in bad.reason and repr(member) in bad.reason


def test_list_field_names_the_item_outside(tmp_path):
    name = _field(lambda n, tp, allowed: typing.get_origin(next(iter(typing.get_args(tp) or (tp,)))) is list
                  and all(isinstance(v, str) for v in allowed.values))
    good = adapter.engine_arg_values()[name].values[0]
    assert spec_with(tmp_path, **{name: [good]}).status is Status.PASS
    bad = spec_with(tmp_path, **{name: [good, "nope"]})
    assert bad.status is Status.FAIL
    assert f"engine arg {name}={[good, 'nope']!r}: 'nope' is not one of vllm" in bad.reason


def test_parser_choices_and_literal_members_are_all_allowed():
    values, types = adapter.engine_arg_values(), adapter.engine_arg_types()
    for name, choices in cli_choices().items():
        assert set(choices) <= set(values[name].values), name
    for name, tp in types.items():
        if closed_values(tp) is not None:
            assert set(closed_values(tp).values) <= set(values[name].values), name


def test_values_are_read_once_per_process():
    assert adapter.engine_arg_values() is adapter.engine_arg_values()


def _vllm_loads_tokenizer_mode(mode: str, where: Path) -> bool:
    from vlcheck.adapter.engine import tokenizer_mode_loads

    return tokenizer_mode_loads(mode, str(where))


def test_every_allowed_tokenizer_mode_is_one_vllm_loads(tmp_path):
    allowed = adapter.engine_arg_values()["tokenizer_mode"]
    assert "auto" in allowed.values and "hf" in allowed.values
    for mode in allowed.values:
        assert _vllm_loads_tokenizer_mode(mode, tmp_path), mode
    assert not allowed.allows("no_such_mode") and not _vllm_loads_tokenizer_mode("no_such_mode", tmp_path)


def test_aria_tokenizer_mode_slow_follows_vllm(tmp_path):
    """aria's multi-image example passes tokenizer_mode="slow": vLLM 0.24 resolves it to the HF
    tokenizer with use_fast=False; a vLLM whose registry does not know it refuses it at load."""
    aria = load_spec(SPECS / "aria.toml")
    assert aria.multi_image.engine_args["tokenizer_mode"] == "slow"
    accepted = _vllm_loads_tokenizer_mode("slow", tmp_path)
    if adapter.version() == "0.24.0":  # the pinned reference
        assert accepted
    result = engine_args_check(aria, aria.multi_image)
    if accepted:
        assert result.status is Status.PASS, result.reason
    else:
        assert result.status in (Status.FAIL, Status.DEVIATION)
        finding = result.finding or result.reason
        assert f"engine arg tokenizer_mode='slow' is not one of vllm {adapter.version()}'s allowed values: 'auto', " \
               in finding
        assert "'hf'" in finding
