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
from vlcheck.core.textdiff import describe_difference, without_today
from vlcheck.prompt import hub_files
from vlcheck.prompt.assets import ModelAssets, Status as AssetStatus
from vlcheck.prompt.render import default_questions, messages, render_prompt
from vlcheck.prompt.templates import TemplateUnavailable, resolve
from vlcheck.spec.schema import FamilySpec, Variant

SPECIAL_TOKEN = re.compile(r"<\|[^<>|]+\|>|<[^<>\s]+>|\[[A-Z_]+\]")
"""What looks like a special token inside a placeholder: `<|image_pad|>`, `<image>`, `[IMG]`."""


def template_unavailable(spec: FamilySpec, check: str, variant: Variant, err: TemplateUnavailable) -> CheckResult:
    status = Status.FAIL if err.is_failure else Status.SKIP
    return CheckResult(spec.name, check, status, f"[{variant.kind}] {err.reason}")


UNKNOWN_SPECIAL = {"bos_token": "\x00bos_token\x00", "eos_token": "\x00eos_token\x00"}
"""Stand-ins for bos/eos strings no file here gives: matched against the example as one special token."""


def match_unknown_special(hand: str, by_template: str) -> dict[str, str] | None:
    """The bos/eos strings that make the template's rendering equal the hand prompt, each one
    special-looking token used consistently (None: no such strings)."""
    pattern, seen = "", set()
    for part in re.split("(\x00(?:bos|eos)_token\x00)", by_template):
        name = part.strip("\x00")
        if part in UNKNOWN_SPECIAL.values():
            pattern += f"(?P={name})" if name in seen else f"(?P<{name}>(?:{SPECIAL_TOKEN.pattern}))"
            seen.add(name)
        else:
            pattern += re.escape(part)
    found = re.fullmatch(pattern, hand)
    return found.groupdict() if found else None


def shown(prompt: str) -> str:
    """A rendering as a person reads it and a snapshot keeps it: unknown bos/eos strings by name,
    today's date (templates such as Mistral's write it) as the served record writes it."""
    for name, marker in UNKNOWN_SPECIAL.items():
        prompt = prompt.replace(marker, "{" + name + "}")
    return without_today(prompt)


def template_conformance(spec: FamilySpec, variant: Variant) -> CheckResult:
    """Hand prompt vs chat template (or, for chat-template examples, the rendered prompts).

    bos/eos strings that no file here gives (tokenizer_config.json / special_tokens_map.json
    absent) do not stop the check: the rendering is compared with each of them as one
    special token, and the strings the example used are recorded as read from the example."""
    check = "template"
    kind = variant.kind
    try:
        template = resolve(variant)
    except TemplateUnavailable as err:
        return template_unavailable(spec, check, variant, err)
    unknown = template.missing_special()
    rendered, details, differing, read_from_example = [], [], [], {}
    try:
        for modality in variant.modalities:
            for count in variant.item_counts():
                for question in default_questions(variant, modality, count):
                    by_template = template.render(messages(variant, modality, question, count), variant.modalities,
                                                  unknown_special=UNKNOWN_SPECIAL)
                    rendered.append((modality, count, question, shown(by_template)))
                    if variant.prompt.template is None:
                        continue
                    hand = render_prompt(spec, variant, modality, question, count)
                    strings = match_unknown_special(hand, by_template) if unknown else None
                    if strings is not None:
                        read_from_example.update(strings)
                    elif hand != by_template:
                        differing.append((modality, count))
                        if len(details) < 3:
                            details.append(f"[{kind} {modality} x{count}] " +
                                           describe_difference(hand, shown(by_template), "example", "template"))
    except TemplateUnavailable as err:
        return template_unavailable(spec, check, variant, err)
    data = {f"{kind}.template_source": template.source, f"{kind}.template_sha256": template.sha256,
            f"{kind}.rendered": rendered}
    if template.uses("bos_token") or template.uses("eos_token"):
        data[f"{kind}.special_tokens_source"] = template.special_source or (
            f"unknown ({', '.join(unknown)}): {template.unknown_special_why}")
    if read_from_example:
        data[f"{kind}.special_tokens_read_from_example"] = read_from_example
    unread = f" ({', '.join(unknown)} not in the files here: compared as one special token)" if unknown else ""
    if variant.prompt.template is None:
        return CheckResult(spec.name, check, Status.PASS, f"[{kind}] rendered with {template.source}{unread}", data=data)
    if not differing:
        return CheckResult(spec.name, check, Status.PASS, f"[{kind}] hand == template{unread}", data=data)
    shapes = ", ".join(sorted({f"{m} x{c}" for m, c in differing}))
    return declared_deviation(CheckResult(spec.name, check, Status.FAIL,
                                          f"[{kind}] hand prompt differs from {template.source} ({shapes}); "
                                          "fix the spec or declare `deviations.template` with the reason", details, data),
                              variant)


def stop_conformance(spec: FamilySpec, variant: Variant) -> CheckResult:
    """Stop tokens and placeholder tokens against the tokenizer's files and generation_config."""
    check = "stops"
    assets = ModelAssets(variant.model, variant.revision)
    config = assets.get("tokenizer_config.json")
    if config.status is AssetStatus.GATED:
        return CheckResult(spec.name, check, Status.SKIP, f"[{variant.kind}] {config.why()}")
    required, _ = hub_files.needs(check, variant)
    if hub_files.source_of(hub_files.TOKEN_IDS, assets) is None or (
            variant.stop_eos_token and hub_files.source_of(hub_files.EOS_STRING, assets) is None):
        return CheckResult(spec.name, check, Status.SKIP,
                           f"[{variant.kind}] no token list: {hub_files.what_would_do(required, assets)}")
    ids = assets.token_ids()
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
    data[f"{variant.kind}.sources"] = fact_sources(assets)
    if problems:
        return declared_deviation(CheckResult(spec.name, check, Status.FAIL, f"[{variant.kind}] " + problems[0], problems,
                                              data), variant)
    return CheckResult(spec.name, check, Status.PASS, f"[{variant.kind}] stops resolve: {data[f'{variant.kind}.stop_ids']}",
                       data=data)


def fact_sources(assets: ModelAssets) -> dict[str, str]:
    """Which file each fact of the stops check came from (files that give no fact are left out)."""
    facts = {"token ids": hub_files.TOKEN_IDS, "eos token": hub_files.EOS_STRING, "model eos": hub_files.MODEL_EOS}
    out = {}
    for name, fact in facts.items():
        givers = [f"{s.filename} ({s.what})" for s in fact.sources
                  if assets.get(s.filename).found and s.gives(hub_files.read(assets.get(s.filename)))]
        if name == "token ids":
            out[name] = " + ".join(givers) or "none"  # token_ids() merges every file that lists some
        else:
            out[name] = givers[0] if givers else "none"
    return out


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
    if f"{kind}.special_tokens_source" in template.data:
        lines.append(f"special tokens source: {template.data[f'{kind}.special_tokens_source']}")
    if f"{kind}.special_tokens_read_from_example" in template.data:
        lines.append("special tokens read from the example: " +
                     json.dumps(template.data[f"{kind}.special_tokens_read_from_example"], ensure_ascii=False))
    lines += ["", f"stops: {stops.status.value}" + (f" ({stops.reason})" if stops.status is not Status.PASS else "")]
    for key in ("stop_ids", "stop_id_tokens", "model_eos", "model_eos_source", "vllm_stop_ids", "stop_problems", "sources"):
        if f"{kind}.{key}" in stops.data:
            lines.append(f"{key.replace('_', ' ')}: {json.dumps(stops.data[f'{kind}.{key}'], ensure_ascii=False)}")
    return "\n".join(lines) + "\n"
