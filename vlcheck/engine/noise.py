"""Golden tolerances from measured noise, stored with the golden they guard.

A golden file keeps, per GPU (or `cpu`) that measured it and per request shape, how far the
top-5 logprobs move without any change to vLLM, torch or the checkpoint:
- `alone`: each request in a batch of its own instead of batched as in the golden (another batch
  shape, so other kernels; vLLM's engine core does not fix the batch a request lands in);
- `repeat`: the same batch again on the same engine;
- `against_golden`: the golden replayed on this GPU (only where it was recorded on another one);
- a configuration's name (`compiled`, `chunked`, ...): that configuration's outputs against the
  eager golden. Fused kernels, CUDA graphs and prefill in chunks reduce in another order than the
  eager engine: on an H100 compiled engines moved paligemma2's and llava-onevision's top-5
  logprobs 0.0002-0.001 nats from the eager golden, beyond 3 x their batch noise. Only that
  configuration's comparison counts it, and only under `CONFIGURATION_CEILING`.

The tolerance of a comparison is `NOISE_FACTOR` x the largest of these for that shape on the GPU
that compares (`scaled`: never under the logprobs' rounding). A GPU with no measurement
takes the largest measured on any GPU, and says so. Noise is measured on the versions the golden
was recorded on (`--vlcheck-measure-noise`, and with every `--vlcheck-update-goldens`): what another
vLLM moves beyond it is a change to show, never noise.
"""

from __future__ import annotations

from dataclasses import dataclass

NOISE_FACTOR = 3
"""Measured noise x 3: one replay's noise underestimates the next one's (H200 goldens replayed on
H100s: 0 to 0.0022 nats, 0.0 for gemma3), while a 1% change of a projector moved gemma3's by
0.0066 and qwen2_vl's, idefics3's and mistral3's by 0.018 to 0.056."""
RESOLUTION = 1e-6
"""Logprobs are stored to 6 decimals (goldens.LOGPROB_DECIMALS): rounding alone moves one by this."""
KINDS = ("alone", "repeat", "against_golden")
CONFIGURATION_CEILING = 0.01
"""A configuration's distance to the eager golden is stored as its noise only below this and with
every generated token the golden's: beyond it the move is a finding for a person to read (glm4_1v
compiled on vLLM 0.24.0: 1.3 nats at the first token), not noise. 0.01 is the fixed cross-GPU
tolerance of before, above every batch or GPU noise measured (at most 0.0034 nats)."""
VERSIONS = ("vllm", "torch", "dtype")
"""What must equal the golden's for a measurement to be noise: the GPU may differ, these may not."""


@dataclass(frozen=True)
class Tolerance:
    nats: float
    basis: str
    """Where the number comes from, for the test's message and the report."""

    def __str__(self) -> str:
        return f"{self.nats} nats ({self.basis})"


def scaled(nats: float) -> float:
    """A measured distance as a bound: `NOISE_FACTOR` x it, at least `NOISE_FACTOR` x the rounding."""
    return round(NOISE_FACTOR * max(nats, RESOLUTION), 6)


def _largest(measured: dict[str, dict[str, float]], shape: str, kinds: tuple[str, ...] = KINDS) -> float | None:
    values = [by_shape[shape] for kind, by_shape in measured.items() if kind in kinds and shape in by_shape]
    return max(values) if values else None


def tolerance(noise: dict | None, device: str, shape: str, configuration: str | None = None,
              noise_of: str | None = None) -> Tolerance | None:
    """The tolerance for `shape` compared on `device` (a GPU's name, or `cpu`), or None when the
    golden stores no noise for that shape (a golden recorded before noise was measured).
    `configuration`: a configuration held to the eager golden, whose own measured distance counts too;
    where none is measured for `shape`, that of `noise_of` (an engine of the same numerics) does."""
    stored = {d: n for d, n in (noise or {}).items() if d != "versions"}
    if not any(_largest(n, shape) is not None for n in stored.values()):
        return None
    note = ""
    if configuration and not _measured_for(stored, configuration, shape):
        note = f"; no {configuration} distance to the eager engine measured (--vlcheck-measure-noise)"
        if noise_of and _measured_for(stored, noise_of, shape):
            configuration, note = noise_of, f"{note}: the distance of {noise_of}, an engine of the same numerics"
    kinds = KINDS + ((configuration,) if configuration else ())
    if device in stored and _largest(stored[device], shape) is not None:  # this GPU's own eager noise
        largest, where = _largest(stored[device], shape, kinds), f"measured on {device}"
    else:
        # a configuration's distance measured here (spec_ngram on an H200 whose eager noise was measured on
        # an H100 only) counts beside the eager noise of the GPUs that measured it
        measured = {d: n for d, n in stored.items() if _largest(n, shape, kinds) is not None}
        largest = max(_largest(n, shape, kinds) for n in measured.values())
        eager = sorted(d for d, n in stored.items() if _largest(n, shape) is not None)
        where = f"no noise measured on {device}: the largest measured on {', '.join(sorted(set(eager) | set(measured)))}"
    return Tolerance(scaled(largest), f"{NOISE_FACTOR} x {largest} nats of noise, {where}{note}")


def _measured_for(measured: dict[str, dict], configuration: str, shape: str) -> bool:
    return any(shape in n.get(configuration, {}) for n in measured.values())


def configuration_distance_refused(name: str, distance: dict[str, float], not_near_ties: list[str],
                                   ceiling: float = CONFIGURATION_CEILING) -> str | None:
    """Why `name`'s distance to the eager engine cannot be stored as its noise, or None.
    `not_near_ties`: the shapes where it generated other tokens than the eager engine at a step
    whose two candidates were not within 2 x the tolerance the distance gives (a near-tie that
    rounding broke the other way is noise; bfloat16 against float32 breaks some)."""
    if not_near_ties:
        return f"{name} generated other tokens than the eager engine ({', '.join(not_near_ties)}): a finding, not noise"
    over = {shape: d for shape, d in distance.items() if d > ceiling}
    if over:
        return f"{name} moved {over} nats from the eager engine, over {ceiling}: a finding, not noise"
    return None


def can_measure(recorded_on: dict | None, now: dict[str, str]) -> str | None:
    """Why this run cannot measure the golden's noise (another vLLM, torch or dtype), or None."""
    if recorded_on is None:
        return "the golden does not say where it was recorded: re-record it (--vlcheck-update-goldens)"
    other = [f"{k} {now[k]} (golden: {recorded_on.get(k)})" for k in VERSIONS if recorded_on.get(k) != now[k]]
    if other:
        return ("noise is measured on the versions the golden was recorded on; this run has " + ", ".join(other) +
                ": what moves here is a change, not noise")
    return None


def merged(noise: dict | None, device: str, recorded_on: dict, measured: dict[str, dict[str, float]]) -> dict:
    """The golden's noise with this device's measurement added: each measurement is one sample of
    the noise, so per kind and shape the largest measured on this device is kept (pixtral_hf's
    repeat noise on an H100: 0.0014 nats one run, less the next)."""
    earlier = (noise or {}).get(device, {})
    combined = {**earlier, **{kind: _largest_of(earlier.get(kind, {}), by_shape) for kind, by_shape in measured.items()}}
    return {**(noise or {}), "versions": {k: recorded_on[k] for k in VERSIONS}, device: combined}


def with_configuration(noise: dict | None, device: str, recorded_on: dict, name: str, distance: dict[str, float]) -> dict:
    """The golden's noise with configuration `name`'s distance to it, measured on `device` (the
    largest per shape, as `merged`)."""
    return merged(noise, device, recorded_on, {name: distance})


def _largest_of(earlier: dict[str, float], now: dict[str, float]) -> dict[str, float]:
    return {shape: max(v for v in (earlier.get(shape), now.get(shape)) if v is not None) for shape in {**earlier, **now}}
