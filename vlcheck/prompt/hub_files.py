"""Which of a model's small Hub files each CPU conformance check needs, and the fewest to bring.

A check needs *facts* (the chat template, the special tokens' ids, the eos token's string); each
fact comes from any one of a few files. A file that is here may still not give the fact (a
tokenizer_config.json without `added_tokens_decoder` lists no token ids). From that, for a check
that cannot run: the smallest set of files that would make it run, so an air-gapped user knows
what to bring, and `vlcheck list --missing-files` prints them in a form a fetch script reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any, Callable

from vlcheck.prompt.assets import Asset, ModelAssets, Status
from vlcheck.spec.schema import Variant


def _has_key(*keys: str) -> Callable[[Any], bool]:
    return lambda data: isinstance(data, dict) and any(data.get(k) for k in keys)


def _nonempty(data: Any) -> bool:
    return bool(data)


def _has_template(data: Any) -> bool:
    return isinstance(data, str) or _has_key("chat_template")(data)


def _has_vllm_fallback(config: Any) -> bool:
    from vlcheck import adapter

    model_type = isinstance(config, dict) and config.get("model_type")
    return bool(model_type) and adapter.chat_template_fallback(model_type, "") is not None


@dataclass(frozen=True)
class Source:
    filename: str
    gives: Callable[[Any], bool]
    """Does this file's content give the fact (applied to its JSON, or its text for .jinja)."""

    what: str
    """What in the file gives it, for "which source each fact came from"."""

    worth_fetching: bool = True
    """False for a source that gives the fact only for some models (config.json names a model type
    vLLM ships a fallback template for): counted when here, never offered to fetch."""


@dataclass(frozen=True)
class Fact:
    name: str
    sources: tuple[Source, ...]
    """Any one of them gives the fact, in the order vLLM / transformers prefer them."""


TEMPLATE = Fact("the chat template", (
    Source("chat_template.jinja", _has_template, "the file"),
    Source("chat_template.json", _has_template, "its chat_template"),
    Source("tokenizer_config.json", _has_template, "its chat_template"),
    Source("config.json", _has_vllm_fallback, "a model_type vLLM has a fallback template for",
           worth_fetching=False),
))
TOKEN_IDS = Fact("the special tokens' ids", (
    Source("tokenizer_config.json", _has_key("added_tokens_decoder"), "its added_tokens_decoder"),
    Source("added_tokens.json", _nonempty, "the file"),
    Source("tokenizer.json", _has_key("added_tokens"), "its added_tokens"),
))
EOS_STRING = Fact("the eos token's string", (
    Source("tokenizer_config.json", _has_key("eos_token"), "its eos_token"),
    Source("special_tokens_map.json", _has_key("eos_token"), "its eos_token"),
))
SPECIAL_STRINGS = Fact("the bos/eos token strings the template writes", (
    Source("tokenizer_config.json", _has_key("bos_token", "eos_token"), "its bos_token/eos_token"),
    Source("special_tokens_map.json", _has_key("bos_token", "eos_token"), "its bos_token/eos_token"),
))
MODEL_EOS = Fact("the model's eos ids", (
    Source("generation_config.json", _has_key("eos_token_id"), "its eos_token_id"),
    Source("config.json", lambda d: _has_key("eos_token_id")(d) or _has_key("eos_token_id")((d or {}).get("text_config")),
           "its eos_token_id"),
))


def needs(check: str, variant: Variant) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
    """(facts the check cannot run without, facts it records or confirms when they are there)."""
    if check == "template":
        required = () if variant.prompt.explicit_chat_template is not None else (TEMPLATE,)
        return required, (SPECIAL_STRINGS,)
    if check == "stops":
        return (TOKEN_IDS, *((EOS_STRING,) if variant.stop_eos_token else ())), (MODEL_EOS,)
    raise KeyError(f"no Hub-file needs are known for check {check!r}")


CHECKS = ("template", "stops")


def read(asset: Asset) -> Any:
    if not asset.found:
        return None
    return asset.text() if asset.filename.endswith(".jinja") else asset.json()


def source_of(fact: Fact, assets: ModelAssets) -> Source | None:
    """The first file here that gives the fact."""
    for source in fact.sources:
        asset = assets.get(source.filename)
        if asset.found and source.gives(read(asset)):
            return source
    return None


def describe_source(fact: Fact, assets: ModelAssets) -> str | None:
    source = source_of(fact, assets)
    return None if source is None else f"{source.filename} ({source.what})"


def _could_give(source: Source, assets: ModelAssets) -> bool:
    """A file that is not here might give the fact once fetched; one that is here and lacks it, or
    that does not exist upstream, will not."""
    return source.worth_fetching and assets.get(source.filename).status in (
        Status.MISSING_OFFLINE, Status.UNREACHABLE, Status.GATED)


def smallest_sets(facts: tuple[Fact, ...], assets: ModelAssets) -> list[tuple[str, ...]]:
    """Every smallest set of absent files that would give all of `facts` (empty list: none would)."""
    unmet = [f for f in facts if source_of(f, assets) is None]
    if not unmet:
        return [()]
    candidates: list[str] = []
    for fact in unmet:
        candidates += [s.filename for s in fact.sources if _could_give(s, assets) and s.filename not in candidates]
    for size in range(1, len(unmet) + 1):
        found = [combo for combo in combinations(candidates, size)
                 if all(any(s.filename in combo for s in f.sources) for f in unmet)]
        if found:
            return found
    return []


def what_would_do(facts: tuple[Fact, ...], assets: ModelAssets) -> str:
    """One clause for a skip: the fewest files that would make the check run, and why each is needed."""
    unmet = [f for f in facts if source_of(f, assets) is None]
    sets = smallest_sets(facts, assets)
    if not unmet:
        return ""
    present_but_silent = [f"{s.filename} is here but lacks {s.what.removeprefix('its ')}"
                          for f in unmet for s in f.sources
                          if assets.get(s.filename).found and not s.gives(read(assets.get(s.filename)))]
    needed = " and ".join(f.name for f in unmet)
    at = assets.repo + (f"@{assets.revision}" if assets.revision else "")
    if not sets:
        clause = f"no file of {at} can give {needed} here"
    else:
        first, *others = [" + ".join(s) for s in sets]
        alone = " alone" if len(sets[0]) == 1 else ""
        clause = f"{first}{alone} from {at} would give {needed}" + (f" (or {', or '.join(others)})" if others else "")
    return clause + (f"; {'; '.join(present_but_silent)}" if present_but_silent else "")


@dataclass(frozen=True)
class FileRow:
    """One line of `vlcheck list --missing-files`."""

    family: str
    variant: str
    check: str
    repo: str
    revision: str | None
    filename: str
    state: str
    role: str
    """`required` (the check cannot run without one of its fact's files) or `optional`."""

    fetch: bool
    """Part of the smallest set that would make the check run."""


def file_rows(family: str, variant: Variant) -> list[FileRow]:
    assets = ModelAssets(variant.model, variant.revision)
    rows: list[FileRow] = []
    for check in CHECKS:
        required, optional = needs(check, variant)
        sets = smallest_sets(required, assets)
        to_fetch = set(sets[0]) if sets else set()
        seen: set[str] = set()
        for role, facts in (("required", required), ("optional", optional)):
            for fact in facts:
                for source in fact.sources:
                    if source.filename in seen:
                        continue
                    seen.add(source.filename)
                    asset = assets.get(source.filename)
                    state = asset.status.value
                    if asset.found and not source.gives(read(asset)):
                        state = f"found, lacks {source.what.removeprefix('its ')}"
                    rows.append(FileRow(family, variant.kind, check, variant.model, variant.revision, source.filename,
                                        state, role, source.filename in to_fetch))
    return rows
