"""CPU conformance of a family against its model's own files: chat template and stop tokens.

Template: the example's hand-written prompt must equal the model's chat template rendering of the
same request, unless the spec declares the deviation with a reason. Families whose example calls
`apply_chat_template` are rendered here (and snapshotted) instead.

Stops: stop token strings resolve to ids, hard-coded ids decode to special tokens, and every
placeholder piece vLLM matches as a token is a single token. The ids vLLM really stops on are
recorded as a fact: the example's, the tokenizer's eos and the model's generation config eos.
"""

from __future__ import annotations

import json
import re

from vlcheck.core.results import CheckResult, Status, declared_deviation
from vlcheck.core.textdiff import describe_difference
from vlcheck.prompt.assets import ModelAssets, Status as AssetStatus
from vlcheck.prompt.render import default_questions, messages, render_prompt
from vlcheck.prompt.templates import TemplateUnavailable, chat_renderer, resolve
from vlcheck.spec.schema import FamilySpec, Variant

SPECIAL_TOKEN = re.compile(r"<\|[^<>|]+\|>|<[^<>\s]+>|\[[A-Z_]+\]")
"""What looks like a special token inside a placeholder: `<|image_pad|>`, `<image>`, `[IMG]`."""


def template_unavailable(spec: FamilySpec, check: str, variant: Variant, err: TemplateUnavailable) -> CheckResult:
    status = Status.FAIL if err.is_failure else Status.SKIP
    return CheckResult(spec.name, check, status, f"[{variant.kind}] {err.reason}")


def template_conformance(spec: FamilySpec, variant: Variant) -> CheckResult:
    """Hand prompt vs chat template (or, for chat-template examples, the rendered prompts)."""
    check = "template"
    try:
        template = resolve(variant)
    except TemplateUnavailable as err:
        return template_unavailable(spec, check, variant, err)
    render = chat_renderer()
    rendered, details, differing = [], [], []
    try:
        for modality in variant.modalities:
            for count in variant.item_counts():
                for question in default_questions(variant, modality):
                    by_template = render(variant, messages(variant, modality, question, count))
                    rendered.append((modality, count, question, by_template))
                    if variant.prompt.template is None:
                        continue
                    hand = render_prompt(spec, variant, modality, question, count)
                    if hand != by_template:
                        differing.append((modality, count))
                        if len(details) < 3:
                            details.append(f"[{variant.kind} {modality} x{count}] " +
                                           describe_difference(hand, by_template, "example", "template"))
    except TemplateUnavailable as err:
        return template_unavailable(spec, check, variant, err)
    data = {f"{variant.kind}.template_source": template.source, f"{variant.kind}.template_sha256": template.sha256,
            f"{variant.kind}.rendered": rendered}
    if variant.prompt.template is None:
        return CheckResult(spec.name, check, Status.PASS, f"[{variant.kind}] rendered with {template.source}", data=data)
    if not differing:
        return CheckResult(spec.name, check, Status.PASS, f"[{variant.kind}] hand == template", data=data)
    shapes = ", ".join(sorted({f"{m} x{c}" for m, c in differing}))
    return declared_deviation(CheckResult(spec.name, check, Status.FAIL,
                                          f"[{variant.kind}] hand prompt differs from {template.source} ({shapes}); "
                                          "fix the spec or declare `deviations.template` with the reason", details, data),
                              variant)


def stop_conformance(spec: FamilySpec, variant: Variant) -> CheckResult:
    """Stop tokens and placeholder tokens against the tokenizer's files and generation_config."""
    check = "stops"
    assets = ModelAssets(variant.model, variant.revision)
    config = assets.get("tokenizer_config.json")
    if config.status is AssetStatus.GATED:
        return CheckResult(spec.name, check, Status.SKIP, f"[{variant.kind}] {config.why()}")
    ids = assets.token_ids()
    if not ids:
        missing = [assets.get(f) for f in ("tokenizer_config.json", "added_tokens.json", "tokenizer.json")]
        why = "; ".join(a.why() for a in missing if not a.found) or "the tokenizer files list no added tokens"
        return CheckResult(spec.name, check, Status.SKIP, f"[{variant.kind}] no token list: {why}")
    by_id = {v: k for k, v in ids.items()}
    special = assets.special_tokens()
    problems, facts = [], {}

    resolved = []
    for token in variant.stop_tokens or ():
        if token in ids:
            resolved.append(ids[token])
        elif not variant.drop_unknown_stop_tokens:
            problems.append(f"stop token {token!r} is not a token of {variant.model}: it resolves to None")
    if variant.stop_eos_token:
        if "eos_token" in special and special["eos_token"] in ids:
            resolved.append(ids[special["eos_token"]])
        else:
            problems.append("the example stops on tokenizer.eos_token_id, which the tokenizer files do not give")
    for token_id in variant.stop_token_ids or ():
        if token_id in by_id:
            facts[str(token_id)] = by_id[token_id]
        else:
            problems.append(f"stop_token_ids {token_id} is not a special token of {variant.model}")

    model_eos, eos_source = model_eos_ids(assets)
    default_eos = ids.get(special.get("eos_token", ""))
    # vLLM always adds the generation config's eos_token_id to the stop set
    # (SamplingParams.update_from_generation_config; `--generation-config vllm` only neutralises the
    # sampling defaults), so a model eos apart from the tokenizer's is a stop, never a problem.
    vllm_stops = sorted(set(resolved) | set(variant.stop_token_ids or ()) | set(model_eos)
                        | ({default_eos} if default_eos is not None else set())) if eos_source else None

    for modality, placeholder in variant.modalities.items():
        if placeholder.matched_as_text:
            continue
        for piece in SPECIAL_TOKEN.findall(placeholder.text.replace("{i}", "1")):
            if piece not in ids:
                problems.append(f"{modality} placeholder piece {piece!r} is not a single token of {variant.model}")

    data = {f"{variant.kind}.stop_ids": resolved + list(variant.stop_token_ids or ()),
            f"{variant.kind}.stop_id_tokens": facts, f"{variant.kind}.model_eos": model_eos,
            f"{variant.kind}.model_eos_source": eos_source, f"{variant.kind}.vllm_stop_ids": vllm_stops}
    data[f"{variant.kind}.stop_problems"] = problems
    if problems:
        return declared_deviation(CheckResult(spec.name, check, Status.FAIL, f"[{variant.kind}] " + problems[0], problems,
                                              data), variant)
    return CheckResult(spec.name, check, Status.PASS, f"[{variant.kind}] stops resolve: {data[f'{variant.kind}.stop_ids']}",
                       data=data)


def model_eos_ids(assets: ModelAssets) -> tuple[list[int], str | None]:
    """The eos ids vLLM reads from the model: generation_config.json's, else config.json's (vLLM
    derives a generation config from the model config when the file is absent)."""
    for filename in ("generation_config.json", "config.json"):
        data = assets.json_or_none(filename)
        if data is None:
            continue
        eos = data.get("eos_token_id", (data.get("text_config") or {}).get("eos_token_id"))
        return ([eos] if isinstance(eos, int) else list(eos or [])), filename
    return [], None


def hub_document(spec: FamilySpec, variant: Variant, template: CheckResult, stops: CheckResult) -> str:
    """The snapshot of one example against its model's files: which template won (and its
    sha256, so an upstream change shows), the prompts it renders, and the resolved stops."""
    from vlcheck.prompt.snapshots import quote

    kind = variant.kind
    lines = [f"# hub conformance: {spec.name} [{kind}] {variant.model}", ""]
    lines.append(f"template: {template.status.value}" + (f" ({template.reason})" if template.status is not Status.PASS else ""))
    if f"{kind}.template_source" in template.data:
        lines.append(f"template source: {template.data[f'{kind}.template_source']}")
        lines.append(f"template sha256: {template.data[f'{kind}.template_sha256']}")
        for modality, count, question, prompt in template.data[f"{kind}.rendered"]:
            lines.append(f"rendered [{modality} x{count}] {quote(question)}: {quote(prompt)}")
    lines += ["", f"stops: {stops.status.value}" + (f" ({stops.reason})" if stops.status is not Status.PASS else "")]
    for key in ("stop_ids", "stop_id_tokens", "model_eos", "model_eos_source", "vllm_stop_ids", "stop_problems"):
        if f"{kind}.{key}" in stops.data:
            lines.append(f"{key.replace('_', ' ')}: {json.dumps(stops.data[f'{kind}.{key}'], ensure_ascii=False)}")
    return "\n".join(lines) + "\n"
