"""Greedy goldens: generated token ids and top-5 logprobs of the example's requests, recorded with
the environment that made them (vLLM, torch, GPU, dtype).

The rule is measured noise, not top-5 membership: every top-5 logprob within a tolerance of the
golden's, and a different token only where the golden had a near-tie (`within_noise`). The tolerance
is 3 x the noise stored with the golden (`noise.py`), the fixed constants below only for a golden
that stores none. vLLM's
`check_logprobs_close` (`logprobs_close`, kept for vLLM against transformers and TP=N against
TP=1, where the implementations differ) lets a 1% change of a vision encoder's output through.

Measured on H200s (vLLM 0.24.0, torch 2.11.0, float32 with TF32 off, seeded weights, 45
family-configs), in nats, the largest difference of any top-5 logprob before the first differing
token:
- the same requests on the same engine, batched as in the golden vs each alone: 0 to 0.0034
  (qwen3_vl image); the batch a request lands in is not fixed: vLLM's engine core schedules
  requests as they arrive, so two runs on two H200s differed by up to 0.0009 (llava multi_image,
  12 shapes), and an exact repeat holds only where the batches happen to repeat;
- vLLM against transformers on CPU (another implementation) where they agree: 0.0009 to 0.0127;
- the vision encoder's or projector's output scaled by 1.01 (qwen2_vl, idefics3, mistral3):
  0.018 to 0.056.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from vlcheck.engine import noise
from vlcheck.prompt.snapshots import SNAPSHOT_ROOT

GOLDEN_ROOT = SNAPSHOT_ROOT / "gpu_goldens"
CPU_GOLDEN_ROOT = SNAPSHOT_ROOT / "cpu_engine_goldens"
"""vLLM's CPU build's goldens, one folder per instruction-set class (`devices.cpu_kernels`): each class
runs other kernels, so a golden of one is not the other's (GPU goldens serve every GPU, with each
GPU's measured noise)."""
CPU_CLASS_UNRECORDED = "avx512_any"
"""The goldens recorded before the class was: on AVX-512 machines (their MoE and W4A16 engines ran,
whose kernels the AVX2 build lacks), with or without BF16 unknown. They serve both AVX-512 classes
until one records its own, and say so (their machine reads `cpu avx512 (BF16 unrecorded)`)."""
LOGPROB_DECIMALS = 6
"""float32 logprobs carry ~7 significant digits: 6 decimals keep an exact repeat exact."""
REPEAT_TOLERANCE = 0.005
"""Nats, same vLLM, torch, GPU and dtype, for a golden that stores no measured noise (`noise.py`
gives the tolerance of one that does) and for two runs on one engine: 1.5 x the largest
batch-composition noise measured (0.0034), a third of the smallest 1.01-scaling effect (0.018)."""
NOISE_TOLERANCE = 0.01
"""Nats, a golden that stores no measured noise, recorded on another vLLM, torch or GPU: 3 x the
largest same-version noise, under the smallest 1.01-scaling effect; a release that moves the
numerics as far as another implementation does (up to 0.0127) is shown, not passed."""


def golden_path(weights: str, name: str, platform: str = "gpu", recording: bool = False) -> Path:
    """Where the golden is read (or, `recording`, written): for vLLM's CPU build, this machine's class's
    folder; a golden read there that it lacks falls back to `CPU_CLASS_UNRECORDED` on AVX-512 machines."""
    if platform != "cpu":
        return GOLDEN_ROOT / weights / f"{name}.json"
    from vlcheck.core.devices import cpu_kernels

    here = cpu_kernels()
    own = CPU_GOLDEN_ROOT / here / weights / f"{name}.json"
    earlier = CPU_GOLDEN_ROOT / CPU_CLASS_UNRECORDED / weights / f"{name}.json"
    if recording or own.exists() or not here.startswith("avx512") or not earlier.exists():
        return own
    return earlier


def missing_golden(path: Path, what: str = "golden") -> str:
    """Why there is no golden at `path` (a `what`: `fp8 golden`), and what to do: for vLLM's CPU build,
    which instruction-set classes have one."""
    try:
        where = path.parent.relative_to(SNAPSHOT_ROOT.parent.parent)
    except ValueError:  # goldens kept elsewhere (a test's, a user's)
        where = path.parent
    missing = f"no {what} {path.name} under {where}"
    if CPU_GOLDEN_ROOT not in path.parents:
        return f"{missing}: record it with --vlcheck-update-goldens and review it"
    weights = path.parent.name
    others = sorted(d.name for d in CPU_GOLDEN_ROOT.iterdir() if (d / weights / path.name).exists())
    return (f"{missing}: vLLM's CPU build runs other kernels per instruction-set class, and none was recorded "
            f"for this machine's ({path.parent.parent.name}); recorded for: {', '.join(others) or 'none'}. "
            "Record it here with --vlcheck-update-goldens and review it")


def from_outputs(outputs) -> list[dict[str, Any]]:
    """vLLM RequestOutputs -> [{prompt_tokens, token_ids, top_logprobs: [{id: logprob}], text}]:
    `text` is vLLM's detokenized output, compared where the tokens are equal."""
    out = []
    for o in outputs:
        c = o.outputs[0]
        top = [{str(t): round(float(lp.logprob), LOGPROB_DECIMALS) for t, lp in pos.items()} for pos in (c.logprobs or [])]
        out.append({"prompt_tokens": len(o.prompt_token_ids), "token_ids": list(c.token_ids), "top_logprobs": top,
                    "text": c.text})
    return out


def environment(dtype: str, model_dir: str | Path | None = None) -> dict[str, str]:
    """What a golden was recorded on: a repeat on the same is exact. With `model_dir`, also the
    checkpoint's fingerprint: not part of the rule, but what tells a golden made on another
    checkpoint (vlcheck built it differently) from a change of vLLM's."""
    import torch

    from vlcheck.core.versions import installed

    from vlcheck.core.devices import device_name

    # a golden names its machine: a GPU, or `cpu <instruction-set class>` (vLLM's CPU build)
    now = {"vllm": installed()["vllm"] or "?", "torch": torch.__version__, "gpu": device_name(), "dtype": dtype}
    if model_dir is not None:
        now["checkpoint"] = checkpoint_fingerprint(model_dir)
    return now


FULLY_HASHED_BYTES = 64 << 20
"""Files up to this size are hashed whole (every synthetic checkpoint); a larger one (a user's real
weights) by its size and safetensors header (names, shapes, dtypes)."""


def checkpoint_fingerprint(model_dir: str | Path) -> str:
    """sha256 (16 hex) over the checkpoint folder's files: configs, tokenizer, processor, weights."""
    h = hashlib.sha256()
    root = Path(model_dir)
    # Hub downloads' own .cache inside the folder is bookkeeping; the folder itself may well live
    # under a .cache (vlcheck's default checkpoint cache is ~/.cache/vlcheck): only parts below root count.
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ".cache" not in p.relative_to(root).parts):
        size = path.stat().st_size
        h.update(f"{path.relative_to(root)}\0{size}\0".encode())
        with open(path, "rb") as f:
            if size <= FULLY_HASHED_BYTES:
                h.update(f.read())
            elif path.suffix == ".safetensors":
                header = int.from_bytes(f.read(8), "little")
                h.update(f.read(min(header, FULLY_HASHED_BYTES)))
    return h.hexdigest()[:16]


def other_checkpoint(recorded_on: dict | None, now: dict[str, str]) -> str | None:
    """Why a golden's difference may be vlcheck's, not vLLM's: it was made on another checkpoint."""
    if "checkpoint" not in now:
        return None
    was = (recorded_on or {}).get("checkpoint")
    if was is None:
        return ("the golden does not say which checkpoint it was made on (recorded before checkpoints were "
                f"fingerprinted; this one is {now['checkpoint']}): if vlcheck's synthetic checkpoint changed "
                "since, re-record it (--vlcheck-update-goldens) after reading the difference")
    if was != now["checkpoint"]:
        return (f"the golden was made on another checkpoint (fingerprint {was}, this run's {now['checkpoint']}): "
                "the checkpoint changed (vlcheck builds it differently, or your model folder changed), not "
                "necessarily vLLM; re-record (--vlcheck-update-goldens) after reading the difference")
    return None


def same_environment(recorded_on: dict | None, now: dict[str, str]) -> bool:
    return recorded_on is not None and all(recorded_on.get(k) == now[k] for k in ("vllm", "torch", "gpu", "dtype"))


def unusable(outputs: list[dict]) -> list[str]:
    """Outputs that cannot be a golden or be compared with one: NaN logprobs rank nothing."""
    return [f"request {i}: NaN logprobs: the forward pass produced no usable logits"
            for i, a in enumerate(outputs) if any(lp != lp for pos in a["top_logprobs"] for lp in pos.values())]


def _common(golden: list[dict], actual: list[dict]) -> list[str]:
    if len(golden) != len(actual):
        return [f"{len(actual)} outputs, golden has {len(golden)}"]
    problems = unusable(actual)
    problems += [f"request {i}: {a['prompt_tokens']} prompt tokens, golden {g['prompt_tokens']}"
                 for i, (g, a) in enumerate(zip(golden, actual)) if g["prompt_tokens"] != a["prompt_tokens"]]
    return problems + detokenized_differently(golden, actual)


def detokenized_differently(golden: list[dict], actual: list[dict]) -> list[str]:
    """The same token ids decoded to another text (goldens recorded before the text was kept have none)."""
    return [f"request {i}: the same tokens {a['token_ids']} detokenized to {a['text']!r}, golden {g['text']!r}"
            for i, (g, a) in enumerate(zip(golden, actual))
            if "text" in g and "text" in a and g["token_ids"] == a["token_ids"] and g["text"] != a["text"]]


def largest_move(g_top: dict[str, float], a_top: dict[str, float]) -> float:
    """The largest difference of a logprob both top-k lists hold."""
    return max((abs(g_top[t] - a_top[t]) for t in g_top.keys() & a_top.keys()), default=0.0)


def tolerance_for(recorded_on: dict | None, now: dict[str, str]) -> float:
    """The fixed tolerance of a golden that stores no measured noise."""
    return REPEAT_TOLERANCE if same_environment(recorded_on, now) else NOISE_TOLERANCE


def shape_tolerance(stored: "Golden", now: dict[str, str], shape: str, configuration: str | None = None,
                    noise_of: str | None = None) -> noise.Tolerance:
    """The measured noise's tolerance for `shape` where the golden stores it, else the fixed one, saying so."""
    measured = noise.tolerance(stored.noise, now["gpu"], shape, configuration, noise_of)
    if measured is not None:
        return measured
    fixed = tolerance_for(stored.recorded_on, now)
    where = "the same vLLM, torch and GPU" if fixed == REPEAT_TOLERANCE else "another vLLM, torch or GPU"
    return noise.Tolerance(fixed, f"no noise stored with this golden: the fixed tolerance for {where} "
                                  "(measure it: --vlcheck-measure-noise)")


def compare_shapes(stored: "Golden", actual: dict[str, list[dict]], now: dict[str, str],
                   configuration: str | None = None, noise_of: str | None = None
                   ) -> dict[str, tuple[noise.Tolerance, list[str]]]:
    """Per shape of `actual`: its tolerance and what moved beyond it (`within_noise`); `configuration`:
    a configuration held to the eager golden (its own measured distance counts as noise, or where it
    has none, that of `noise_of`)."""
    found = {}
    for shape, outputs in actual.items():
        rule = shape_tolerance(stored, now, shape, configuration, noise_of)
        found[shape] = (rule, compare_golden(stored.outputs.get(shape, []), outputs, rule.nats))
    return found


def compare_golden(golden: list[dict], actual: list[dict], tolerance: float | None) -> list[str]:
    """`tolerance=None`: the outputs must repeat the golden exactly; else `within_noise`."""
    problems = _common(golden, actual)
    if problems or tolerance is not None:
        return problems or within_noise(golden, actual, tolerance)
    for i, (g, a) in enumerate(zip(golden, actual)):
        if g == {k: v for k, v in a.items() if k in g}:  # the text is compared in _common
            continue
        pos = next((p for p, (gt, at) in enumerate(zip(g["token_ids"], a["token_ids"]))
                    if gt != at or g["top_logprobs"][p] != a["top_logprobs"][p]), None)
        if pos is None:
            problems.append(f"request {i}: {len(a['token_ids'])} tokens generated, golden {len(g['token_ids'])}")
            continue
        g_top, a_top = g["top_logprobs"][pos], a["top_logprobs"][pos]
        problems.append(f"request {i} token {pos}: not an exact repeat of a golden recorded on the same vLLM, torch "
                        f"and GPU: generated {a['token_ids'][pos]} (golden {g['token_ids'][pos]}), top-5 logprobs "
                        f"moved by up to {largest_move(g_top, a_top):.6f} nats (golden {g_top}, now {a_top})")
    return problems


def within_noise(golden: list[dict], actual: list[dict], tolerance: float) -> list[str]:
    """Every top-k logprob within `tolerance` of the golden's up to the first differing token
    (a token in one top-k only must lie within it of the other's k-th); a differing token only
    where the golden's two candidates were within 2 x `tolerance` (a near-tie broken by noise),
    after which the sequences may diverge."""
    problems = _common(golden, actual)
    if problems:
        return problems
    for i, (g, a) in enumerate(zip(golden, actual)):
        for pos, (gt, at) in enumerate(zip(g["token_ids"], a["token_ids"])):
            g_top, a_top = g["top_logprobs"][pos], a["top_logprobs"][pos]
            moved = {t: (g_top[t], a_top[t]) for t in sorted(g_top.keys() & a_top.keys())
                     if abs(g_top[t] - a_top[t]) > tolerance}
            for t in sorted(g_top.keys() ^ a_top.keys()):
                mine, other = (g_top[t], a_top) if t in g_top else (a_top[t], g_top)
                if mine > min(other.values()) + tolerance:
                    moved[t] = (g_top.get(t), a_top.get(t))
            if moved:
                problems.append(f"request {i} token {pos}: top-5 logprobs moved beyond {tolerance} nats "
                                f"(token: golden, now): {moved}")
                break
            if gt != at:
                tie = str(at) in g_top and abs(g_top[str(gt)] - g_top[str(at)]) <= 2 * tolerance
                if not tie:
                    problems.append(f"request {i} token {pos}: generated {at}, golden {gt}, which was no near-tie "
                                    f"(golden's top-5: {g_top})")
                break
        else:
            if len(g["token_ids"]) != len(a["token_ids"]):  # equal prefix, but one stopped earlier
                problems.append(f"request {i}: {len(a['token_ids'])} tokens generated, golden {len(g['token_ids'])}")
    return problems


def logprobs_close(golden: list[dict], actual: list[dict]) -> list[str]:
    """vLLM's `check_logprobs_close` rule, for two implementations (vLLM against transformers,
    TP=N against TP=1): equal tokens pass; at the first differing token each side's token must
    be in the other's top-k logprobs, after which the sequences may diverge."""
    problems = _common(golden, actual)
    if problems:
        return problems
    for i, (g, a) in enumerate(zip(golden, actual)):
        for pos, (gt, at) in enumerate(zip(g["token_ids"], a["token_ids"])):
            if gt == at:
                continue
            g_top, a_top = g["top_logprobs"][pos], a["top_logprobs"][pos]
            if str(at) not in g_top or str(gt) not in a_top:
                problems.append(f"request {i} token {pos}: generated {at}, golden {gt}, and neither is in the "
                                f"other's top-{len(g_top)} logprobs")
            break  # the sequences diverge from here on: nothing further to compare
        else:
            if len(g["token_ids"]) != len(a["token_ids"]):  # equal prefix, but one stopped earlier
                problems.append(f"request {i}: {len(a['token_ids'])} tokens generated, golden {len(g['token_ids'])}")
    return problems


def largest_difference(golden: list[dict], actual: list[dict]) -> float:
    """The largest difference of a top-k logprob both hold, up to each request's first differing
    token (the measured noise between two runs)."""
    largest = 0.0
    for g, a in zip(golden, actual):
        for gt, at, g_top, a_top in zip(g["token_ids"], a["token_ids"], g["top_logprobs"], a["top_logprobs"]):
            largest = max(largest, largest_move(g_top, a_top))
            if gt != at:
                break
    return round(largest, LOGPROB_DECIMALS)


class Golden(NamedTuple):
    recorded_on: dict | None
    """None for a golden from before it was kept."""
    outputs: dict[str, list[dict]]
    """Per request shape."""
    noise: dict | None = None
    """The noise measured with it (`noise.py`), None before it was measured."""
    extra: dict = {}
    """What a configuration keeps beside its own golden (fp8: its distance to the unquantized output)."""


def load(path: Path) -> Golden | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if "outputs" in data and "recorded_on" in data:
        extra = {k: v for k, v in data.items() if k not in ("recorded_on", "outputs", "noise")}
        return Golden(data["recorded_on"], data["outputs"], data.get("noise"), extra)
    return Golden(None, data)


def save(path: Path, outputs: dict[str, list[dict]], recorded_on: dict[str, str], measured_noise: dict | None = None,
         **extra) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"recorded_on": recorded_on, "outputs": outputs, **({"noise": measured_noise} if measured_noise else {}),
            **extra}
    # Replaced whole: a tier that measures noise rewrites goldens that a process beside it may be reading.
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)
