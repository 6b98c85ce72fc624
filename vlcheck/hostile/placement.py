"""Where the features land: when the user's question contains the family's placeholder text, which
placeholder does vLLM expand, the one the template put there or the one the user typed?

The example's prompt is rendered with the question "What is <placeholder> here?" and run through
vLLM's processor on CPU (as served, with the processor cache, and with it off). The expanded range's
token offset is matched with the token position of each placeholder occurrence in the prompt: the
image must go where the template put it, not where the user typed. One line per family-config
and path, recorded like the hostile-input table.
"""

from __future__ import annotations

from dataclasses import dataclass

from vlcheck.core.results import CheckResult, Status, from_exception, raised_by
from vlcheck.prompt.requests import example_prompt, media_data
from vlcheck.spec.schema import FamilySpec, Variant

TEMPLATE = "template's"
USERS = "user's"
PROCESSOR = "inserted by the processor"


def typed_placeholder(variant: Variant, modality: str) -> str:
    """What a user would type: the example's placeholder text, or for prompts the chat template
    renders and for a template that writes the audio or video token itself (`implicit`), the
    placeholder vLLM's chat API writes for the model."""
    text = variant.modalities[modality].render(1)
    if not text and (variant.prompt.template is None or modality != "image"):
        from vlcheck import adapter

        text = adapter.takes_modality(adapter.load_model_class(variant.architecture), modality)[1] or ""
    return text or f"<{modality}>"


def hostile_question(variant: Variant, modality: str) -> str:
    return f"What is {typed_placeholder(variant, modality)} here?"


@dataclass
class Placement:
    path: str
    """`served` (processor cache on, as an engine serves) or `cache off`."""
    outcome: str
    """`template's` (right), `user's` (the features land where the user typed), `inserted by the
    processor` (a family whose processor places the media itself), or what went wrong."""
    detail: str

    def line(self) -> str:
        return f"{self.path}: {self.outcome}: {self.detail}"


def token_positions(tokenizer, prompt: str, text: str) -> dict[int, int]:
    """Character offset -> token offset of every occurrence of `text` in the prompt (the tokens of
    the prompt before it, as vLLM tokenizes the whole prompt)."""
    positions, start = {}, prompt.find(text)
    while start != -1:
        positions[start] = len(tokenizer(prompt[:start])["input_ids"])
        start = prompt.find(text, start + 1)
    return positions


def owner(offset: int, template_tokens: list[int], user_token: int | None) -> str:
    """Whose placeholder an expanded range belongs to: the occurrence nearest before its offset
    (a range may start a few tokens into the placeholder text, e.g. after "Image-1: "). One token
    of slack: the prefix, tokenized alone, may count a BOS that vLLM's tokenization does not
    (Gemma 3's prompt writes its own <bos>)."""
    starts = [(t, TEMPLATE) for t in template_tokens] + ([(user_token, USERS)] if user_token is not None else [])
    before = [(t, who) for t, who in starts if t <= offset + 1]
    return max(before)[1] if before else PROCESSOR


def placement(spec: FamilySpec, variant: Variant, processor, path: str) -> Placement:
    from vlcheck.adapter import numerics
    from vlcheck.hostile.inputs import classify_error

    modality = variant.primary_modality
    question = hostile_question(variant, modality)
    prompt = example_prompt(spec, variant, modality, question, 1)
    typed = typed_placeholder(variant, modality)
    occurrences = token_positions(processor.info.get_tokenizer(), prompt, typed)
    user_char = prompt.find(question) + question.index(typed) if question in prompt else None
    user_token = occurrences.pop(user_char, None) if user_char is not None else None
    template_tokens = sorted(occurrences.values())
    try:
        out = numerics.processor_outputs(processor, prompt, {modality: media_data(variant, modality, 1)})
    except Exception as err:  # noqa: BLE001 - vLLM rejecting the request is an outcome; vlcheck's crash is not
        if raised_by(err) == "vlcheck":
            raise
        return Placement(path, "error", classify_error(err)[1])
    ranges = out["placeholders"].get(modality, [])
    where = (f"typed {typed!r}; expanded at token {[o for o, _ in ranges]}; the template's placeholder at "
             f"{template_tokens or 'none (the processor inserts it)'}, the user's at {user_token}")
    if len(ranges) != 1:
        return Placement(path, f"{len(ranges)} ranges for 1 item", where)
    return Placement(path, owner(ranges[0][0], template_tokens, user_token), where)


def placements(spec: FamilySpec, variant: Variant, local: str, engine_args: dict) -> list[Placement]:
    from vlcheck import adapter

    return [placement(spec, variant, adapter.create_processor(local, engine_args, cached=cached), path)
            for path, cached in (("served", True), ("cache off", False))]


def placement_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """The catalogue's `placement` check: one line per path (fact `<variant>.placement`); fails
    when, as served, the features land where the user typed the placeholder."""
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.checkpoints.synthetic import NotBuildable
    from vlcheck.engine.engines import variant_engine_args
    from vlcheck.prompt.conformance import template_unavailable
    from vlcheck.prompt.templates import TemplateUnavailable

    where = f"[{variant.kind}]"
    try:
        local = model_files(spec, variant)
    except NotBuildable as err:
        return CheckResult(spec.name, "placement", Status.SKIP, f"{where} no checkpoint: {err}")
    try:
        found = placements(spec, variant, str(local), variant_engine_args(variant))
    except ImportError as err:
        return CheckResult(spec.name, "placement", Status.SKIP,
                           f"{where} {spec.name}: its processor needs a package that is not installed: {err}")
    except TemplateUnavailable as err:
        return template_unavailable(spec, "placement", variant, err)
    except Exception as err:  # noqa: BLE001 - vLLM failing to build the processor fails; vlcheck's crash is an error
        return from_exception(spec.name, "placement", err, where)
    data = {f"{variant.kind}.placement": [p.line() for p in found]}
    served = found[0]
    if served.outcome == USERS:
        return CheckResult(spec.name, "placement", Status.FAIL,
                           f"{where} {spec.name}: as served, the features land where the user typed: {served.detail}",
                           data=data)
    return CheckResult(spec.name, "placement", Status.PASS, f"{where} as served: {served.outcome}", data=data)
