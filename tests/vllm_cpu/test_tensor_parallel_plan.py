"""Tensor-parallel-ready synthetic checkpoints, on CPU: per family-config, whether the TP-ready
build works and which TP sizes its head counts allow (`python -m vlcheck.engine.tensor_parallel` prints
the table); the GPU configurations tp2, tp4, encoder_dp* and pp2_tp2 skip a size with the same reason."""

import pytest

from vlcheck.checkpoints.synthetic import SHRINK, NotBuildable, checkpoint_dir, tp_ready_sizes, tp_ready_value
from vlcheck.engine.tensor_parallel import TP_READY_HEADS, blockers, plan, sharded_counts


def test_tp_ready_sizes_keep_head_dim_and_scale_widths():
    sizes = tp_ready_sizes(8)
    assert (sizes["num_attention_heads"], sizes["num_key_value_heads"], sizes["head_dim"]) == (8, 8, 32)
    assert sizes["hidden_size"] == 8 * 32 and sizes["intermediate_size"] == 2 * 8 * 32
    assert sizes["num_hidden_layers"] == SHRINK["num_hidden_layers"] and sizes["num_experts"] == SHRINK["num_experts"]
    assert SHRINK["num_attention_heads"] == 2 and SHRINK["hidden_size"] == 64  # the default build is untouched


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("out_hidden_size", 64, 256),  # restates the default width: follows it
    ("hidden_size", 2048, 2048),  # Gemma3n's MobileNet output: a real size, kept
    ("image_size", 64, 64),  # not a width: kept (the image token count depends on it)
    ("num_heads", 2, 8), ("num_key_value_heads", 1, 8), ("intermediate_size", [128, 128], [512, 512]),
    ("vision_config", {"hidden_size": 64, "num_heads": 2, "patch_size": 14}, {"hidden_size": 256, "num_heads": 8, "patch_size": 14}),
    ("add_qkv_bias", True, True),
])
def test_recipe_values_that_restate_the_default_shrink_follow_it(key, value, expected):
    assert tp_ready_value(key, value, 8) == expected


def test_blockers_name_every_count_that_does_not_divide():
    config = {"text_config": {"num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": [512, 100]},
              "vision_config": {"num_heads": 6}}
    assert blockers(config, 2) == []
    assert blockers(config, 4) == ["vision_config.num_heads = 6 does not divide by 4"]  # 2 kv heads: replicated
    assert blockers(config, 8) == ["text_config.intermediate_size = 100 does not divide by 8",
                                   "vision_config.num_heads = 6 does not divide by 8"]
    assert blockers({"num_key_value_heads": 3}, 2) == ["num_key_value_heads = 3 does not divide by 2"]


def test_tp_ready_checkpoint_builds_and_splits(family, variant, request):
    try:
        checkpoint_dir(family, variant)
    except NotBuildable as err:
        pytest.skip(f"no synthetic checkpoint: {err}")
    p = plan(family, variant)
    request.node.user_properties.append(("tp_sizes", p.sizes))
    assert p.built, f"the default checkpoint builds, the TP-ready one not: {p.reason}"
    heads = [v for _, kind, v in sharded_counts(p.saved_config) if kind == "heads"]
    # the default shrink's 2 heads all followed (counts the recipes leave at the real model's stay)
    assert TP_READY_HEADS in heads and SHRINK["num_attention_heads"] not in heads, f"attention head counts {heads}"
    assert 2 in p.sizes, p.why_not(2)  # every family-config runs at TP=2 on a 2-GPU host


def test_the_tp_table_is_read_from_the_gpu_tiers_junit(tmp_path):
    from vlcheck.configurations.sharded import results_table

    name = "test_configuration"
    (tmp_path / "a.xml").write_text(
        f'<testsuites><testsuite><testcase name="{name}[gpu-qwen2_vl-single-tp4]"><properties>'
        '<property name="configuration" value="tp4"/><property name="proof" value="{&quot;workers&quot;: 4}"/>'
        '</properties></testcase>'
        f'<testcase name="{name}[gpu-qwen2_vl-single-chunked]"/>'
        '<testcase name="test_stop_token_ends_generation[qwen2_vl-single]"/></testsuite></testsuites>')
    (tmp_path / "b.xml").write_text(
        f'<testsuites><testsuite><testcase name="{name}[gpu-deepseek_ocr-single-tp2]">'
        '<skipped type="pytest.xfail" message="declared deviation: head_dim 0"/></testcase>'
        f'<testcase name="{name}[gpu-blip-2-single-pp2_tp2]"><failure message="[single] pp2_tp2: image x1: PP=2 x TP=2 '
        'against TP=1: token 3 differs"/></testcase>'
        f'<testcase name="{name}[gpu-llava-onevision-single-encoder_dp4]"><failure message="Failed: Timeout (&gt;240.0s) '
        'from pytest-timeout."/></testcase></testsuite></testsuites>')
    assert results_table(tmp_path).splitlines()[2:] == [
        '| qwen2_vl-single | tp4 | agree | {"workers": 4} |  |',
        "| deepseek_ocr-single | tp2 | declared (xfail) | - | declared deviation: head_dim 0 |",
        "| blip-2-single | pp2_tp2 | DIFFER | - | [single] pp2_tp2: image x1: PP=2 x TP=2 against TP=1: token 3 differs |",
        "| llava-onevision-single | encoder_dp4 | not compared | - | Failed: Timeout (>240.0s) from pytest-timeout. |",  # never a difference
    ]


@pytest.mark.parametrize(("routed", "expected"), [(1, 1), (8, SHRINK["num_experts_per_tok"])])
def test_shrinking_never_routes_a_token_to_more_experts_than_the_model_does(routed, expected):
    from types import SimpleNamespace

    from vlcheck.checkpoints.synthetic import shrink

    config = SimpleNamespace(num_experts_per_tok=routed, num_local_experts=16,
                             text_config=SimpleNamespace(num_experts_per_tok=routed))
    shrink(config)
    assert (config.num_experts_per_tok, config.text_config.num_experts_per_tok) == (expected, expected)
    assert config.num_local_experts == SHRINK["num_local_experts"]
