"""Greedy goldens: generated token ids and top-5 logprobs, compared the way vLLM's own tests
compare (`check_logprobs_close`): equal tokens pass; at the first differing token each side's
token must be in the other's top-k logprobs (numeric noise), after which the sequences may
diverge. Anything else is a real change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vlcheck.prompt.snapshots import SNAPSHOT_ROOT

GOLDEN_ROOT = SNAPSHOT_ROOT / "gpu_goldens"
CPU_GOLDEN_ROOT = SNAPSHOT_ROOT / "cpu_engine_goldens"
"""vLLM's CPU build's goldens (float32, its own kernels): never compared with the GPU ones."""


CPU_LOGPROB_TOLERANCE = 0.01
"""Nats: on vLLM's CPU build (float32, no batch-dependent kernels) a golden's logprobs must also
hold where the tokens agree. vLLM 0.24.0 + torch 2.11.0 against 0.32.0 + torch 2.13.0 moved them by
about 1e-4; GPU goldens (bfloat16, batch composition moves logits) keep vLLM's token rule alone."""


def golden_path(weights: str, name: str, platform: str = "gpu") -> Path:
    return (CPU_GOLDEN_ROOT if platform == "cpu" else GOLDEN_ROOT) / weights / f"{name}.json"


def logprob_tolerance(platform: str) -> float | None:
    return CPU_LOGPROB_TOLERANCE if platform == "cpu" else None


def from_outputs(outputs) -> list[dict[str, Any]]:
    """vLLM RequestOutputs -> [{prompt_tokens, token_ids, top_logprobs: [{id: logprob}]}]."""
    out = []
    for o in outputs:
        c = o.outputs[0]
        top = [{str(t): round(float(lp.logprob), 4) for t, lp in pos.items()} for pos in (c.logprobs or [])]
        out.append({"prompt_tokens": len(o.prompt_token_ids), "token_ids": list(c.token_ids), "top_logprobs": top})
    return out


def unusable(outputs: list[dict]) -> list[str]:
    """Outputs that cannot be a golden or be compared with one: NaN logprobs rank nothing."""
    return [f"request {i}: NaN logprobs: the forward pass produced no usable logits"
            for i, a in enumerate(outputs) if any(lp != lp for pos in a["top_logprobs"] for lp in pos.values())]


def compare(golden: list[dict], actual: list[dict], logprob_tolerance: float | None = None) -> list[str]:
    """Differences that are not numeric noise, by vLLM's check_logprobs_close rule; with
    `logprob_tolerance`, also the top-k logprobs of every position where the tokens still agree."""
    if len(golden) != len(actual):
        return [f"{len(actual)} outputs, golden has {len(golden)}"]
    problems = unusable(actual)
    if problems:
        return problems
    for i, (g, a) in enumerate(zip(golden, actual)):
        if g["prompt_tokens"] != a["prompt_tokens"]:
            problems.append(f"request {i}: {a['prompt_tokens']} prompt tokens, golden {g['prompt_tokens']}")
        for pos, (gt, at) in enumerate(zip(g["token_ids"], a["token_ids"])):
            if gt == at:
                if logprob_tolerance is not None:
                    problems += _logprobs_moved(i, pos, g["top_logprobs"][pos], a["top_logprobs"][pos], logprob_tolerance)
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


def _logprobs_moved(request: int, pos: int, golden: dict, actual: dict, tolerance: float) -> list[str]:
    off = {t: (lp, actual.get(t)) for t, lp in golden.items() if t in actual and abs(actual[t] - lp) > tolerance}
    return [f"request {request} token {pos}: top-k logprobs moved beyond {tolerance} nats (token: golden, now): {off}"] if off else []


def load(path: Path) -> list[dict] | None:
    return json.loads(path.read_text()) if path.exists() else None


def save(path: Path, outputs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n")
