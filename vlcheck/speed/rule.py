"""When a difference in time is a finding: both environments measured on one machine in sessions
of fresh processes (`ab.py`), each session's median per call kept. An environment's spread is that
of its own session medians (what the machine and the process do to the same code from one start to
the next); its noise is that spread over the square root of its sessions (how far its median may
stray); the two environments' noises combined are what a difference must clear, times `FACTOR`.

    ratio     = median(candidate session medians) / median(baseline session medians)
    spread    = standard deviation of ln(session medians), at least NOISE_FLOOR
    noise     = sqrt(spread(baseline)^2 / sessions + spread(candidate)^2 / sessions)
    SLOWER    where ln(ratio) >  FACTOR x noise   (a finding)
    FASTER    where ln(ratio) < -FACTOR x noise   (reported)
    same      otherwise; undecided with fewer than MIN_SESSIONS sessions
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

FACTOR = 4.0
"""How many combined noises a change must clear. Measured (docs/speed.md): 5 A/A runs, the same
vLLM 0.24.0 environment against a copy of itself on one 2-core machine, 9 family-configs, 100
comparisons: |ln ratio| / noise at most A_A_LARGEST (idefics3's processor, x0.78 within its band of
x1.47), no finding; 4 leaves half as much again. A 30% slowdown planted in qwen2_vl's processor
measured 9 to 38 noises (every qwen2_vl processor comparison SLOWER, nothing else)."""

A_A_LARGEST = 2.64
"""The largest |ln ratio| / noise of those A/A runs: a FACTOR below it would have raised a false alarm."""

NOISE_FLOOR = 0.01
"""ln units (1%): below this an environment's measured spread is timer resolution and too few sessions,
not the machine's calm."""

MIN_SESSIONS = 3
"""Fewer sessions have no spread to measure: their comparison is reported, never decided."""


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
    """SLOWER, FASTER, same, or undecided (too few sessions)."""

    def to_json(self) -> dict:
        return {**asdict(self), "z": round(z_score(self), 2)}


def spread(session_medians: list[float]) -> float:
    """The sample standard deviation, not a median deviation: of 4 sessions, two that agree by chance
    would make a MAD of 0 (measured: phi3_v's processor, 25-39 ms in 4 sessions of one environment)."""
    if len(session_medians) < 2:
        return NOISE_FLOOR
    return max(statistics.stdev(math.log(m) for m in session_medians), NOISE_FLOOR)


def compare(metric: str, baseline: list[float], candidate: list[float]) -> Comparison:
    """`baseline`, `candidate`: each session's median seconds per call."""
    b, c = statistics.median(baseline), statistics.median(candidate)
    ratio = c / b
    noise = math.hypot(spread(baseline) / math.sqrt(len(baseline)), spread(candidate) / math.sqrt(len(candidate)))
    threshold = math.exp(FACTOR * noise)
    if min(len(baseline), len(candidate)) < MIN_SESSIONS:
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
