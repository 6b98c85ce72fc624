"""Spec + questions + modality + item count -> the exact prompt strings. Pure: no vLLM, no Hub.

Hand-written prompts are rendered here byte for byte as the example's f-strings produce them.
Prompts that the example builds with `apply_chat_template` need the model's template; for those
this module builds the messages and hands them to a `ChatRenderer` (see `vlcheck.prompt.templates`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vlcheck.spec.schema import PARTS, PARTS_TEXT_FIRST, FamilySpec, Variant

# The questions of the examples' `get_multi_modal_input` and multi-image `QUESTION`.
IMAGE_QUESTIONS = (
    "What is the content of this image?",
    "Describe the content of this image in detail.",
    "What's in the image?",
    "Where is this image taken?",
)
VIDEO_QUESTIONS = ("Why is this video funny?",)
MULTI_IMAGE_QUESTION = "What is the content of each image?"
AUDIO_QUESTIONS = {1: "What is recited in the audio?", 2: "What sport and what nursery rhyme are referenced?"}
"""audio_language.py's `question_per_audio_count`: the question depends on the number of clips."""
NUM_PROMPTS = 4  # the example's default --num-prompts

Messages = list[dict[str, Any]]
ChatRenderer = Callable[[Variant, Messages], str]
"""Renders messages with a variant's chat template (the model's, or the example's explicit one)."""


class NeedsChatTemplate(LookupError):
    """The example renders this prompt with the model's chat template, which was not given."""

    def __init__(self, family: str, variant: Variant):
        self.family, self.variant = family, variant
        owner = variant.prompt.chat_template
        super().__init__(
            f"{family}: the example renders its prompt with the {owner} chat template of "
            f"{variant.model}; it needs that model's chat_template.jinja / chat_template.json / "
            f"tokenizer_config.json (run with the Hub reachable or HF_HUB_CACHE holding them)"
        )


def default_questions(variant: Variant, modality: str, count: int = 1) -> tuple[str, ...]:
    """The questions the example asks: its four image questions, its video question, the
    multi-image example's single question, or the audio example's question for `count` clips."""
    if variant.kind == "multi_image":
        return (MULTI_IMAGE_QUESTION,)
    if variant.kind == "audio":
        return (AUDIO_QUESTIONS[min(count, max(AUDIO_QUESTIONS))],)
    return VIDEO_QUESTIONS if modality == "video" else IMAGE_QUESTIONS


def fill(text: str, *, question: str, placeholder: str) -> str:
    """Substitute the slots of a spec template (literal braces are written `{{ }}`)."""
    return text.format_map({"question": question, "placeholder": placeholder})


def user_content(variant: Variant, modality: str, question: str, count: int) -> str | list[dict[str, Any]]:
    """The user message content the example builds: typed parts, or a string."""
    media = variant.modalities[modality]
    text = {"type": "text", "text": question}
    if variant.prompt.content == PARTS:
        return [*media.parts(modality, count), text]
    if variant.prompt.content == PARTS_TEXT_FIRST:
        return [text, *media.parts(modality, count)]
    return fill(variant.prompt.content, question=question, placeholder=media.render(count))


def messages(variant: Variant, modality: str, question: str, count: int = 1) -> Messages:
    """The chat request the example sends (or, for a hand template, the one it stands for)."""
    msgs: Messages = []
    if variant.prompt.system is not None:
        msgs.append({"role": "system", "content": variant.prompt.system})
    msgs.append({"role": "user", "content": user_content(variant, modality, question, count)})
    return msgs


def _check(spec: FamilySpec, variant: Variant, modality: str, count: int) -> None:
    if modality not in variant.modalities:
        raise ValueError(f"{spec.name}: the {variant.kind} example does not take {modality!r} "
                         f"(it takes {', '.join(variant.modalities)}; spec {spec.path})")
    top = variant.most_items
    if not 1 <= count <= top:
        raise ValueError(f"{spec.name}: {count} item(s) requested; the {variant.kind} example sends 1..{top}")


def render_prompt(spec: FamilySpec, variant: Variant, modality: str, question: str, count: int = 1,
                  chat_renderer: ChatRenderer | None = None, within_limits: bool = True) -> str:
    """One prompt string, exactly as the example produces it. `within_limits=False` renders
    item counts beyond the example's (the hostile-input cases send more than the limit)."""
    if within_limits:
        _check(spec, variant, modality, count)
    if variant.prompt.template is not None:
        placeholder = variant.modalities[modality].render(count)
        return fill(variant.prompt.template, question=question, placeholder=placeholder)
    if chat_renderer is None:
        raise NeedsChatTemplate(spec.name, variant)
    return chat_renderer(variant, messages(variant, modality, question, count))


def render_prompts(spec: FamilySpec, modality: str = "image", questions: Sequence[str] | None = None,
                   images: int | None = None, chat_renderer: ChatRenderer | None = None) -> list[str]:
    """The example's prompt list: one prompt per question.

    `images=None` uses the single-input example; a number uses the multi-image example (where the
    family has one) with that many images, or the single-input one for `images=1` without.
    """
    variant = pick_variant(spec, modality, images)
    qs = tuple(questions) if questions else default_questions(variant, modality)
    return [render_prompt(spec, variant, modality, q, images or 1, chat_renderer) for q in qs]


def pick_variant(spec: FamilySpec, modality: str, images: int | None) -> Variant:
    """`images=None`: the single-input example. A count: the multi-image example if the family
    has one (for image), else the single-input example for one item."""
    if images is not None and spec.multi_image is not None and modality == "image":
        return spec.multi_image
    if spec.single is not None and (images is None or images == 1):
        return spec.single
    if spec.single is None:
        raise ValueError(f"{spec.name}: only a multi-image example exists; pass a number of images")
    raise ValueError(f"{spec.name}: no multi-image example; it takes one {'/'.join(spec.single.modalities)} item")


def request_prompts(prompts: Sequence[str], num_prompts: int, different_per_request: bool) -> list[str]:
    """The prompt of each of `num_prompts` requests, in the example's two modes: the first prompt
    for every request, or `prompts[i % len(prompts)]` (`--use-different-prompt-per-request`)."""
    if num_prompts < 1:
        raise ValueError("num_prompts must be >= 1")
    chosen = list(prompts) if different_per_request else [prompts[0]]
    return [chosen[i % len(chosen)] for i in range(num_prompts)]
