"""The example script's requests, built correctly: prompts with media, uuids, empty-media resends.

vLLM 0.24.0 drops `multi_modal_data={"image": None}` silently (no placeholder expansion, no cache
query), which is the form the example uses to verify cache hits. `{"image": [None]}` with
`multi_modal_uuids={"image": ["uuid_i"]}` is the form that works; both are built here so the
tests can show the difference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from vlcheck.core import media
from vlcheck.prompt.render import default_questions, render_prompt, request_prompts
from vlcheck.spec.schema import FamilySpec, Variant


def example_prompt(spec: FamilySpec, variant: Variant, modality: str, question: str, count: int = 1) -> str:
    """One prompt as the example makes it: by hand, or through the model's chat template
    (raises TemplateUnavailable when that template cannot be had)."""
    from vlcheck.prompt.templates import chat_renderer  # used only when the example has no hand template

    return render_prompt(spec, variant, modality, question, count, chat_renderer())


def example_prompts(spec: FamilySpec, variant: Variant, modality: str, count: int = 1) -> list[str]:
    """The example's prompts, one per question."""
    return [example_prompt(spec, variant, modality, q, count) for q in default_questions(variant, modality, count)]


def media_data(variant: Variant, modality: str, count: int, offset: int = 0) -> Any:
    """`multi_modal_data[modality]`: one item as itself, several as a list. Different offsets
    give different content (so one test's items never hit another's cache entries)."""
    items = media.items(modality, count, variant.modalities[modality].video_metadata, offset)
    return items[0] if count == 1 else items


@dataclass
class RequestSet:
    inputs: list[dict]
    """The first batch: prompts with media and uuids."""

    resend: list[dict]
    """The same requests with empty media and the same uuids, in the form that works: `[None]`."""

    resend_none: list[dict]
    """The same, in the example's form `{modality: None}` (dropped by vLLM 0.24.0)."""

    distinct_items: int
    """How many different media items the first batch holds (after the repeat simulation)."""


def build(prompts: list[str], modality: str, first_item: Any, num_prompts: int, different_prompts: bool = False,
          repeat_prob: float | None = None, seed: int = 0, with_uuids: bool = True,
          uuid_prefix: str = "uuid") -> RequestSet:
    """The example's batch: `num_prompts` requests cycling through the prompts, each with the
    item (or, with `repeat_prob`, a one-pixel-changed copy unless the draw says repeat)."""
    rng = random.Random(seed)
    chosen = request_prompts(prompts, num_prompts, different_prompts)
    item, distinct = first_item, 1
    inputs, resend, resend_none = [], [], []
    for i, prompt in enumerate(chosen):
        if repeat_prob is not None and i > 0 and rng.random() >= repeat_prob:
            item = media.repeated_with_one_pixel_changed(first_item, i)
            distinct += 1
        uuid = f"{uuid_prefix}_{i}"
        request = {"prompt": prompt, "multi_modal_data": {modality: item}}
        if with_uuids:
            request["multi_modal_uuids"] = {modality: uuid}
        inputs.append(request)
        resend.append({"prompt": prompt, "multi_modal_data": {modality: [None]},
                       "multi_modal_uuids": {modality: [uuid]}})
        resend_none.append({"prompt": prompt, "multi_modal_data": {modality: None},
                            "multi_modal_uuids": {modality: uuid}})
    return RequestSet(inputs, resend, resend_none, distinct)
