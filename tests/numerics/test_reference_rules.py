"""The GPU tier's comparison rules of `vlcheck.numerics.reference`, on numbers measured on an H200."""

from vlcheck.numerics import reference


def test_a_repeat_one_rounding_unit_apart_has_not_moved():
    # gemma3n, float32, the same request twice (H200, vLLM 0.24.0)
    first = {"845": -0.5341, "221": -2.6295, "229": -2.9768, "652": -3.0509, "745": -3.5673}
    again = {"845": -0.5341, "221": -2.6295, "229": -2.9769, "652": -3.0509, "745": -3.5673}
    assert not reference.repeat_moved(first, again)


def test_a_repeat_beyond_rounding_or_with_other_tokens_has_moved():
    first = {"845": -0.5341, "221": -2.6295}
    assert reference.repeat_moved(first, {"845": -0.5343, "221": -2.6295})
    assert reference.repeat_moved(first, {"845": -0.5341, "17": -2.6295})


def test_the_first_step_tolerance_holds_float32_engines_only():
    from vlcheck.numerics import reference

    stored = {"shape": "image x1", "prompt_tokens": 9, "token_ids": [5, 6], "top_logprobs": [{"5": -1.0, "6": -2.0}, {"6": -0.5}]}
    actual = {"shape": "image x1", "prompt_tokens": 9, "token_ids": [5, 6], "top_logprobs": [{"5": -1.09, "6": -2.0}, {"6": -0.5}]}
    assert any("first-step logprobs beyond" in p for p in reference.disagreement(stored, actual, "float32"))
    assert reference.disagreement(stored, actual, "bfloat16") == []  # bfloat16: vLLM's own rule only (same tokens)
