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
