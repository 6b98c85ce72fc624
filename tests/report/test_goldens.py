"""The greedy-golden rule (vLLM's check_logprobs_close): numeric noise passes, a real change fails."""

from vlcheck.gpu.goldens import compare, unusable


def output(tokens, tops, prompt_tokens=10):
    return {"prompt_tokens": prompt_tokens, "token_ids": tokens, "top_logprobs": tops}


GOLDEN = [output([5, 7, 9], [{"5": -0.1, "6": -0.2}, {"7": -0.1, "8": -0.3}, {"9": -0.1}])]


def test_identical_outputs_pass():
    assert compare(GOLDEN, GOLDEN) == []


def test_a_near_tie_swapped_by_noise_passes():
    # token 6 instead of 5, and each token is in the other's top logprobs: noise, not a change
    actual = [output([6, 7], [{"6": -0.1, "5": -0.2}, {"7": -0.1}])]
    assert compare(GOLDEN, actual) == []


def test_a_token_outside_the_top_logprobs_fails():
    actual = [output([42, 7, 9], [{"42": -0.1, "43": -0.2}, {"7": -0.1}, {"9": -0.1}])]
    assert compare(GOLDEN, actual) == ["request 0 token 0: generated 42, golden 5, and neither is in the other's "
                                       "top-2 logprobs"]


def test_a_changed_prompt_token_count_fails():
    actual = [output([5, 7, 9], GOLDEN[0]["top_logprobs"], prompt_tokens=11)]
    assert compare(GOLDEN, actual) == ["request 0: 11 prompt tokens, golden 10"]


def test_stopping_earlier_with_the_same_prefix_fails():
    actual = [output([5, 7], GOLDEN[0]["top_logprobs"][:2])]
    assert compare(GOLDEN, actual) == ["request 0: 2 tokens generated, golden 3"]


def test_a_missing_output_fails():
    assert compare(GOLDEN + GOLDEN, GOLDEN) == ["1 outputs, golden has 2"]


def test_nan_logprobs_fail_even_against_a_nan_golden():
    nan = float("nan")
    broken = [output([0, 0, 0], [{"0": nan, "1": nan}, {"0": nan}, {"0": nan}])]
    assert compare(broken, broken) == ["request 0: NaN logprobs: the forward pass produced no usable logits"]
    assert compare(GOLDEN, broken) == compare(broken, broken)
    assert unusable(broken) == compare(broken, broken) and unusable(GOLDEN) == []
