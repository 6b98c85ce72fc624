"""A transformers reference for each family-config: the example's requests run by transformers on
CPU (float32, greedy) over the seeded synthetic checkpoint, and whether the output sees the input.

The same requests go to vLLM on the GPU tier (`vlcheck/runners/tier/engine/test_vllm_vs_transformers.py`), which
compares its outputs with this reference by vLLM's own rule (`goldens.compare`). On CPU the
reference is recomputed and compared with the stored one (`vlcheck/snapshots/test_reference/`), which
catches transformers-side numerical drift on a machine without a GPU.

Input sensitivity: the first generated token's top-5 logprobs must move when the media change
(same size, different pixels) and must not move when the same request runs again. A family whose
output cannot see its media is a failure, never a golden.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vlcheck.core import media
from vlcheck.prompt.render import default_questions
from vlcheck.prompt.requests import example_prompt
from vlcheck.prompt.snapshots import SNAPSHOT_ROOT
from vlcheck.spec.schema import FamilySpec, Variant

REFERENCE_ROOT = SNAPSHOT_ROOT / "test_reference"
NEW_TOKENS = 4
TOP_K = 5
LOGPROB_TOLERANCE = 1e-3
"""Nats: a recomputed CPU logprob may differ from the stored one by this much (float32 sums in
another order on another CPU are ~1e-5 apart; the stored values are rounded to 1e-4)."""
SENSITIVITY_MIN = 0.05
"""Nats: the least largest change of a first-step top-5 logprob that counts as "the output
depends on the media". The seeded weights give changes of a nat or more."""


@dataclass
class Request:
    """One reference request: the example's prompt for a shape, with its media."""

    shape: str
    """`"<modality> x<count>"`, as the GPU tier's generation runs name them."""
    modality: str
    prompt: str
    items: list
    other_items: list
    """The same request's media with the last item's pixels changed (same size)."""

    def mm_data(self, items: list | None = None) -> dict:
        items = self.items if items is None else items
        return {self.modality: items[0] if len(items) == 1 else items}


def _item(variant: Variant, modality: str, index: int):
    if modality == "image":
        return media.image(index, media.IMAGE_SIZES[0])
    if modality == "audio":
        return media.audio(index)
    clip = media.video(index)
    return (clip, media.video_metadata(len(clip))) if variant.modalities[modality].video_metadata else clip


def requests(spec: FamilySpec, variant: Variant) -> list[Request]:
    """One request per modality: one item for `single`, two for `multi_image` and `audio` (up to its
    example's most)."""
    count = 1 if variant.kind == "single" else min(2, variant.most_items)
    out = []
    for modality in variant.modalities:
        question = default_questions(variant, modality, count)[0]
        items = [_item(variant, modality, i) for i in range(count)]
        other = items[:-1] + [_item(variant, modality, 17)]
        out.append(Request(f"{modality} x{count}", modality, example_prompt(spec, variant, modality, question, count),
                           items, other))
    return out


@dataclass
class Sensitivity:
    other_media_change: float
    """The largest change of a first-step top-5 logprob when the media change (nats)."""
    repeat_change: float
    """The same, when the same request runs again (must be 0)."""


@dataclass
class ReferenceRun:
    shape: str
    prompt_tokens: int
    token_ids: list[int]
    top_logprobs: list[dict[str, float]]
    sensitivity: Sensitivity | None = None

    def as_output(self) -> dict[str, Any]:
        """The form `goldens.compare` takes."""
        return {"prompt_tokens": self.prompt_tokens, "token_ids": self.token_ids, "top_logprobs": self.top_logprobs}


def top_logprobs(logits, k: int = TOP_K) -> dict[str, float]:
    import torch

    logprobs = torch.log_softmax(logits.float(), dim=-1)
    values, ids = logprobs.topk(k)
    return {str(int(i)): round(float(v), 4) for v, i in zip(values, ids)}


def largest_change(a, b, k: int = TOP_K) -> float:
    """The largest difference between two first-step logprob vectors over either's top-k tokens."""
    import torch

    la, lb = torch.log_softmax(a.float(), -1), torch.log_softmax(b.float(), -1)
    ids = torch.cat([la.topk(k).indices, lb.topk(k).indices]).unique()
    return round(float((la[ids] - lb[ids]).abs().max()), 4)


class Reference:
    """transformers' model and processor for one seeded checkpoint, loaded once."""

    def __init__(self, folder: str | Path, spec: FamilySpec, variant: Variant):
        from vlcheck.adapter import numerics

        self.spec, self.variant = spec, variant
        self.model, self.load_report = numerics.hf_load(folder, variant.architecture)
        self.processor = numerics.hf_processor(folder, spec.synthetic.processor_class)
        self.processor_kwargs = dict(variant.engine_args.get("mm_processor_kwargs") or {})

    def inputs(self, request: Request, items: list | None = None) -> dict:
        from vlcheck.adapter import numerics

        return numerics.hf_inputs(self.processor, request.prompt, request.modality,
                                  request.items if items is None else items, self.processor_kwargs)

    def first_logits(self, inputs: dict):
        import torch

        with torch.no_grad():
            return self.model(**inputs).logits[0, -1]

    def run(self, request: Request) -> ReferenceRun:
        import torch

        inputs = self.inputs(request)
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, output_logits=True,
                                      return_dict_in_generate=True, pad_token_id=self.pad_id())
        prompt_tokens = inputs["input_ids"].shape[1]
        tokens = out.sequences[0, prompt_tokens:].tolist()
        run = ReferenceRun(request.shape, prompt_tokens, tokens, [top_logprobs(s[0]) for s in out.logits])
        first = out.logits[0][0]
        other = self.first_logits(self.inputs(request, request.other_items))
        again = self.first_logits(self.inputs(request))
        run.sensitivity = Sensitivity(largest_change(first, other), largest_change(first, again))
        return run

    def pad_id(self) -> int | None:
        tokenizer = getattr(self.processor, "tokenizer", None)
        return getattr(tokenizer, "pad_token_id", None) or getattr(tokenizer, "eos_token_id", None)


def sensitivity_problems(runs: list[ReferenceRun]) -> list[str]:
    """Runs whose output does not depend on the media, or is not repeatable."""
    problems = []
    for run in runs:
        s = run.sensitivity
        if s.other_media_change < SENSITIVITY_MIN:
            problems.append(f"{run.shape}: other media move the first-step top-{TOP_K} logprobs by at most "
                            f"{s.other_media_change} nats (< {SENSITIVITY_MIN}): the output does not see the media")
        if s.repeat_change != 0:
            problems.append(f"{run.shape}: the same request twice differs by {s.repeat_change} nats")
    return problems


def compare(stored: list[dict], runs: list[ReferenceRun], tolerance: float = LOGPROB_TOLERANCE) -> list[str]:
    """Differences between a recomputed reference and the stored one: prompt length and token ids
    exactly, every stored top-k logprob within `tolerance`."""
    if [s["shape"] for s in stored] != [r.shape for r in runs]:
        return [f"shapes {[r.shape for r in runs]}, stored {[s['shape'] for s in stored]}"]
    problems = []
    for s, r in zip(stored, runs):
        if s["prompt_tokens"] != r.prompt_tokens:
            problems.append(f"{r.shape}: {r.prompt_tokens} prompt tokens, stored {s['prompt_tokens']}")
        if s["token_ids"] != r.token_ids:
            problems.append(f"{r.shape}: tokens {r.token_ids}, stored {s['token_ids']}")
        for step, (want, got) in enumerate(zip(s["top_logprobs"], r.top_logprobs)):
            off = {t: (lp, got.get(t)) for t, lp in want.items() if got.get(t) is None or abs(got[t] - lp) > tolerance}
            if off:
                problems.append(f"{r.shape} step {step}: top-{TOP_K} logprobs moved beyond {tolerance} nats "
                                f"(token: stored, now): {off}")
    return problems


def path(config_id: str) -> Path:
    return REFERENCE_ROOT / f"{config_id}.json"


def document(runs: list[ReferenceRun], header: dict[str, Any]) -> str:
    return json.dumps({**header, "runs": [asdict(r) for r in runs]}, indent=1, sort_keys=True) + "\n"


def load(config_id: str) -> dict | None:
    p = path(config_id)
    return json.loads(p.read_text()) if p.exists() else None


# --- the same requests on a vLLM engine (GPU tier) ------------------------------------------------

FLOAT32_FIRST_STEP_TOLERANCE = 0.05
"""Nats: in float32 on both sides, vLLM's first-step top-5 logprobs must lie this close to
transformers' (measured differences on tiny models are ~1e-4; kernels differ, so not exact).
In bfloat16 only vLLM's own rule applies (`goldens.compare`: a differing token must be in the
other side's top-5), as in vLLM's model tests."""


def vllm_first_step(llm, request: Request, items: list | None = None, new_tokens: int = NEW_TOKENS) -> dict:
    """One greedy vLLM request: `goldens.from_outputs`' form (prompt tokens, token ids, top-5)."""
    from vlcheck.engine import goldens
    from vlcheck.engine.runs import greedy

    inputs = {"prompt": request.prompt, "multi_modal_data": request.mm_data(items)}
    return goldens.from_outputs(llm.generate([inputs], greedy(max_tokens=new_tokens, logprobs=TOP_K),
                                             use_tqdm=False))[0]


def top_change(a: dict[str, float], b: dict[str, float]) -> float:
    """How far two top-k logprob dicts lie apart: the largest change of a token both list, or
    infinity where the top-k sets differ."""
    if set(a) != set(b):
        return float("inf")
    return max(abs(a[t] - b[t]) for t in a)


REPEAT_RESOLUTION = 1e-4
"""Nats: the same request twice on an engine may give first-step logprobs one unit of their
4-decimal rounding (`goldens.from_outputs`) apart, as two values closer than that can round to
neighbouring units (gemma3n, float32, H200: token 229 at -2.9768, then -2.9769); more is not rounding."""


def repeat_moved(first: dict[str, float], again: dict[str, float]) -> bool:
    """Whether the same request's second top-k logprobs differ from the first beyond rounding."""
    return round(top_change(first, again), 6) > REPEAT_RESOLUTION


def first_step_problems(stored: list[dict], actual: list[dict], tolerance: float) -> list[str]:
    """float32 only: first-step top-5 logprobs further than `tolerance` from transformers'."""
    problems = []
    for s, a in zip(stored, actual):
        want, got = s["top_logprobs"][0], a["top_logprobs"][0]
        off = {t: (lp, got.get(t)) for t, lp in want.items() if t in got and abs(got[t] - lp) > tolerance}
        if off:
            problems.append(f"{s['shape']}: first-step logprobs beyond {tolerance} nats of transformers' "
                            f"(token: transformers, vLLM): {off}")
    return problems


def disagreement(stored: dict, actual: dict, dtype: str) -> list[str]:
    """How one vLLM run differs from transformers' stored one: vLLM's own rule (a differing token
    must be in the other's top-5), and in float32 also the first-step tolerance."""
    from vlcheck.engine import goldens

    found = goldens.logprobs_close([stored], [actual])
    if dtype == "float32":
        found += first_step_problems([stored], [actual], FLOAT32_FIRST_STEP_TOLERANCE)
    return found


# --- the catalogue's `reference` check ------------------------------------------------------------

def reference_check(spec: FamilySpec, variant: Variant):
    """The transformers reference of one family-config as fact `<variant>.reference` (per request:
    prompt tokens, greedy tokens, top-5 logprobs, input sensitivity), compared by `vlcheck diff`
    within `LOGPROB_TOLERANCE`; fails when the output does not see its media or is not repeatable."""
    from vlcheck.adapter.numerics import NoTransformersModel, require_transformers_model
    from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir
    from vlcheck.core.results import CheckResult, Status, crashed, from_exception
    from vlcheck.prompt.conformance import template_unavailable
    from vlcheck.prompt.templates import TemplateUnavailable

    where = f"[{variant.kind}]"
    try:  # asked of the weightless checkpoint (built once) before drawing any weights
        require_transformers_model(checkpoint_dir(spec, variant), variant.architecture)
        folder = checkpoint_dir(spec, variant, weights=True)
    except NoTransformersModel as err:
        return CheckResult(spec.name, "reference", Status.SKIP, f"{where} {spec.name}: no seeded weights: {err}")
    except NotBuildable as err:
        return CheckResult(spec.name, "reference", Status.SKIP, f"{where} no checkpoint: {err}")
    except ImportError as err:
        return CheckResult(spec.name, "reference", Status.SKIP,
                           f"{where} {spec.name}: its model needs a package that is not installed: {str(err)[:200]}")
    except Exception as err:  # noqa: BLE001 - the builder is vlcheck's: whatever it raises is an error
        return crashed(spec.name, "reference", err, f"{where} {spec.name}: building the seeded checkpoint failed:")
    try:
        runs = [Reference(folder, spec, variant).run(r) for r in requests(spec, variant)]
    except TemplateUnavailable as err:
        return template_unavailable(spec, "reference", variant, err)
    except Exception as err:  # noqa: BLE001 - transformers failing fails the check; vlcheck's crash is an error
        return from_exception(spec.name, "reference", err, where)
    data = {f"{variant.kind}.reference": [asdict(r) for r in runs]}
    problems = sensitivity_problems(runs)
    if problems:
        return CheckResult(spec.name, "reference", Status.FAIL, f"{where} {spec.name}: {problems[0]}", problems, data)
    return CheckResult(spec.name, "reference", Status.PASS,
                       f"{where} {len(runs)} request(s): {', '.join(f'{r.shape} -> {r.token_ids}' for r in runs)}",
                       data=data)


def runs_of(fact: list[dict]) -> list[ReferenceRun]:
    """The `reference` fact back as runs (what `compare` and `document` take)."""
    return [ReferenceRun(**{**r, "sensitivity": Sensitivity(**r["sensitivity"]) if r.get("sensitivity") else None})
            for r in fact]
