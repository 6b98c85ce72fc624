"""The speed rule on constructed round medians: what it calls SLOWER, and what it leaves alone."""

import math

from vlcheck.speed import rule


def rounds(centre: float, wobble: float, n: int = 20) -> list[float]:
    """n round medians around `centre`, alternating +-wobble (relative)."""
    return [centre * (1 + (wobble if i % 2 else -wobble)) for i in range(n)]


def test_a_thirty_percent_slowdown_on_a_calm_machine_is_slower():
    c = rule.compare("processor", rounds(0.010, 0.03), rounds(0.013, 0.03))
    assert c.verdict == "SLOWER" and c.ratio == 1.3


def test_the_same_code_with_noise_is_the_same():
    c = rule.compare("processor", rounds(0.010, 0.05), rounds(0.0102, 0.05))
    assert c.verdict == "same"


def test_a_difference_within_a_noisy_machines_band_is_not_decided_slower():
    noisy = [0.010 * f for f in (0.5, 1.6, 0.7, 1.5, 0.6, 1.4)]
    c = rule.compare("processor", noisy, [x * 1.3 for x in noisy[::-1]])
    assert c.verdict == "same" and math.log(c.ratio) < rule.FACTOR * c.noise


def test_faster_is_reported_and_too_few_rounds_are_undecided():
    assert rule.compare("processor", rounds(0.013, 0.02), rounds(0.010, 0.02)).verdict == "FASTER"
    assert rule.compare("processor", [0.01, 0.01], [0.02, 0.02]).verdict == "undecided"


def test_identical_rounds_keep_a_noise_floor():
    c = rule.compare("processor", [0.01] * 20, [0.01005] * 20)
    assert c.noise > 0 and c.verdict == "same"


def test_the_factor_clears_the_largest_a_a_difference_measured():
    assert rule.FACTOR > rule.A_A_LARGEST
