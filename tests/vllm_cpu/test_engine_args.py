"""Every spec's engine args against the installed vLLM's EngineArgs (fields and types)."""

from pathlib import Path

import pytest

from vlcheck import adapter
from vlcheck.core.results import Status
from vlcheck.cpu.vllm_checks import engine_args_check, value_fits
from vlcheck.runners.testing import assert_as_declared, run_check
from vlcheck.spec.migrations import ENGINE_ARG_MIGRATIONS
from vlcheck.spec.registry import load_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "specs"


def test_engine_args_are_accepted(family, variant, request):
    result = run_check(request, "engine_args", family, variant)
    if result is not None:  # None: compared with --vlcheck-baseline
        assert_as_declared(result, variant)


def test_renamed_arg_fails_with_migration_hint():
    spec = load_spec(FIXTURES / "qwen2_vl_renamed_arg.toml")
    result = engine_args_check(spec, spec.single)
    assert result.status is Status.FAIL
    assert result.reason.startswith("[single] qwen2_vl_renamed_arg: engine arg 'disable_mm_preprocessor_cache' is not")
    assert "migrate to mm_processor_cache_gb=0" in result.reason


@pytest.mark.parametrize("old", sorted(ENGINE_ARG_MIGRATIONS))
def test_migration_table_is_true_for_this_vllm(old):
    """Each migrated arg is gone from the installed vLLM and its replacement is an arg of it."""
    fields = adapter.engine_arg_types()
    assert old not in fields
    hint = ENGINE_ARG_MIGRATIONS[old]
    if hint.startswith("(nothing"):
        return
    replacement = hint.split("=")[0].split(" ")[0]
    assert replacement in fields, f"{old} -> {replacement}: not an EngineArgs field of vllm {adapter.version()}"


def test_value_types():
    fields = adapter.engine_arg_types()
    assert value_fits("bfloat16", fields["dtype"]) and not value_fits("bf16", fields["dtype"])
    assert value_fits(320, fields["max_lora_rank"]) and not value_fits(300, fields["max_lora_rank"])
    assert value_fits({"image": 2}, fields["limit_mm_per_prompt"])
    assert not value_fits({"image": "two"}, fields["limit_mm_per_prompt"])
    assert value_fits(True, fields["trust_remote_code"]) and not value_fits(1, fields["trust_remote_code"])
    assert value_fits(["vllm.model_executor.models.deepseek_ocr.NGramPerReqLogitsProcessor"], fields["logits_processors"])
