"""Find a family's chat template the way vLLM does, and render requests with it.

vLLM's order: the template passed explicitly (the example's `chat_template=`), the processor's
(`chat_template.jinja`, then the older `chat_template.json`), the tokenizer's
(`tokenizer_config.json`'s `chat_template`), then the fallback templates shipped inside the
installed vllm package, keyed by the config's `model_type`. The winner is recorded with its
sha256, so an upstream template change shows up as a snapshot diff.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

from vlcheck.prompt.assets import Asset, ModelAssets, Status
from vlcheck.prompt.render import ChatRenderer, Messages
from vlcheck.spec.schema import MediaPlaceholder, Variant

# Files a template can come from, in vLLM's order of preference (after an explicit one).
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


@dataclass(frozen=True)
class ChatTemplate:
    source: str
    """Which file won: `explicit (spec)`, a file name, or `vllm fallback <file>`."""

    text: str
    special_tokens: dict[str, str]
    """bos/eos/pad/unk strings passed to the template, from the tokenizer config when present."""

    not_cached: tuple[str, ...] = ()
    """Files vLLM would have preferred that are not in the offline cache: the winner is only
    the best available one."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def uses(self, name: str) -> bool:
        return re.search(rf"\b{name}\b", self.text) is not None

    @property
    def content_format(self) -> str:
        """`"string"` or `"openai"`, decided the way the installed vLLM decides it."""
        from vlcheck import adapter

        return adapter.chat_template_content_format(self.text)

    special_source: str | None = None
    """The file the bos/eos strings came from (None: neither file is here)."""

    unknown_special_why: str = ""
    """What would give the bos/eos strings when they are unknown (a skip clause)."""

    def missing_special(self) -> list[str]:
        return [t for t in ("bos_token", "eos_token") if self.uses(t) and t not in self.special_tokens]

    def render(self, messages: Messages, placeholders: dict[str, MediaPlaceholder] | None = None,
               unknown_special: dict[str, str] | None = None) -> str:
        """Render one conversation. A template that expects string content gets typed parts
        flattened the way vLLM's chat API does it: one placeholder line per media item (the
        modality's placeholder, numbered from 1), then the text; one that expects typed parts
        gets string content as a text part. `unknown_special` stands in for bos/eos strings no
        file here gives (a marker the caller matches); without it they raise TemplateUnavailable."""
        from vlcheck.adapter import render_chat_template

        if self.content_format == "string":
            messages = [dict(m, content=_flatten(m["content"], placeholders or {})) for m in messages]
        else:  # vLLM hands "openai" templates typed parts: string content becomes one text part
            messages = [dict(m, content=[{"type": "text", "text": m["content"]}]) if isinstance(m["content"], str)
                        else m for m in messages]
        missing = self.missing_special()
        if missing and unknown_special is None:
            raise TemplateUnavailable(f"the template uses {', '.join(missing)}: {self.unknown_special_why}",
                                      Status.MISSING_OFFLINE)
        special = {**{t: unknown_special[t] for t in missing}, **self.special_tokens} if missing else self.special_tokens
        return render_chat_template(messages, self.text, special)


class TemplateUnavailable(LookupError):
    """No template could be resolved. `status` tells a skip (missing offline, gated) from a
    failure (the model repo does not exist) from "this model has none"."""

    def __init__(self, reason: str, status: Status | None = None, files: tuple[Asset, ...] = ()):
        super().__init__(reason)
        self.reason, self.status, self.files = reason, status, files

    @property
    def is_failure(self) -> bool:
        return self.status is Status.NOT_FOUND and any("no such repo" in a.detail for a in self.files)


def _flatten(content, placeholders: dict[str, MediaPlaceholder]) -> str:
    if isinstance(content, str):
        return content
    media, seen = [], {}
    for part in content:
        if part["type"] in placeholders and placeholders[part["type"]].text:
            seen[part["type"]] = seen.get(part["type"], 0) + 1
            media.append(placeholders[part["type"]].text.replace("{i}", str(seen[part["type"]])))
    text = [p["text"] for p in content if p["type"] == "text"]
    return "\n".join(media + ["\n".join(text)])


def _template_in(asset: Asset) -> str | None:
    if asset.filename.endswith(".jinja"):
        return asset.text()
    value = asset.json().get("chat_template")
    if isinstance(value, list):  # named templates: vLLM and transformers use "default"
        value = next((t["template"] for t in value if t.get("name") == "default"), None)
    return value


def resolve(variant: Variant) -> ChatTemplate:
    """The chat template vLLM would use for this variant's model (raises TemplateUnavailable)."""
    return _resolve(variant.model, variant.revision, variant.prompt.explicit_chat_template)


def model_template(model: str, revision: str | None = None) -> ChatTemplate:
    """The model's own chat template, as vLLM resolves it without `--chat-template`."""
    return _resolve(model, revision, None)


@lru_cache(maxsize=None)
def _resolve(model: str, revision: str | None, explicit: str | None) -> ChatTemplate:
    from vlcheck.prompt import hub_files

    assets = ModelAssets(model, revision)
    special = assets.special_tokens()
    strings = {"special_source": hub_files.describe_source(hub_files.SPECIAL_STRINGS, assets),
               "unknown_special_why": hub_files.what_would_do((hub_files.SPECIAL_STRINGS,), assets)}
    if explicit is not None:
        return ChatTemplate("explicit (spec)", explicit, special, **strings)
    tried: list[Asset] = []
    for filename in TEMPLATE_FILES:
        asset = assets.get(filename)
        tried.append(asset)
        if asset.status is Status.GATED:
            raise TemplateUnavailable(asset.why(), Status.GATED, (asset,))
        if asset.found and (text := _template_in(asset)):
            not_cached = tuple(a.filename for a in tried if a.status is Status.MISSING_OFFLINE)
            return ChatTemplate(filename, text, special, not_cached, **strings)
    if any("no such repo" in a.detail for a in tried):
        raise TemplateUnavailable(tried[0].why(), Status.NOT_FOUND, tuple(tried))
    fallback = _vllm_fallback(assets, model)
    if fallback is not None:
        name, text = fallback
        not_cached = tuple(a.filename for a in tried if a.status is Status.MISSING_OFFLINE)
        return ChatTemplate(f"vllm fallback {name}", text, special, not_cached, **strings)
    missing = [a for a in tried if a.status in (Status.MISSING_OFFLINE, Status.UNREACHABLE)]
    if missing:
        offline_or_not = "not in the HF cache (HF_HUB_OFFLINE is set)" if all(
            a.status is Status.MISSING_OFFLINE for a in missing) else "not reachable"
        raise TemplateUnavailable(f"no chat template: {hub_files.what_would_do((hub_files.TEMPLATE,), assets)}; "
                                  f"{', '.join(a.filename for a in missing)} {offline_or_not}",
                                  Status.MISSING_OFFLINE, tuple(missing))
    raise TemplateUnavailable(f"{model} has no chat template and vLLM ships no fallback for it")


def _vllm_fallback(assets: ModelAssets, model: str) -> tuple[str, str] | None:
    config = assets.get("config.json")
    if not config.found:
        return None
    model_type = config.json().get("model_type")
    if not model_type:
        return None
    from vlcheck import adapter

    path = adapter.chat_template_fallback(model_type, model)
    return (path.name, path.read_text()) if path is not None else None


def chat_renderer() -> ChatRenderer:
    """Render a variant's messages with its resolved template (raises TemplateUnavailable)."""
    def render(variant: Variant, messages: Messages) -> str:
        return resolve(variant).render(messages, variant.modalities)

    return render


def chat_renderer_or_none(variant: Variant) -> ChatRenderer | None:
    try:
        resolve(variant)
    except TemplateUnavailable:
        return None
    return chat_renderer()

