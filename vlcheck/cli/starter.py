"""`vlcheck init MODEL`: a commented starter spec for a user's own model.

Read from the model's files (its folder, or the HF cache / Hub): the architecture from config.json,
mapped to the built-in family serving it (whose synthetic recipe and placeholders the spec then
reuses); the modalities and placeholders vLLM's chat API writes, from vLLM's model registry; the
chat template the way vLLM resolves it; the stops from generation_config.json. The user reviews
the file and keeps it in their own repository.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from vlcheck import __version__
from vlcheck.prompt.assets import ModelAssets
from vlcheck.spec.models import architecture_of, local_dir, model_config
from vlcheck.spec.registry import builtin_base
from vlcheck.spec.schema import MODALITIES, FamilySpec


def family_name(model: str) -> str:
    """A spec (and file) name from the model's folder or repo name: `my-qwen-ft` -> `my_qwen_ft`."""
    return re.sub(r"[^0-9a-zA-Z_]+", "_", Path(model.rstrip("/")).name).strip("_").lower() or "my_model"


def _toml(value) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string or array of numbers is valid TOML


def _placeholders(architecture: str, base: FamilySpec | None) -> tuple[dict[str, str | None], str]:
    """modality -> the placeholder vLLM's chat API writes for one item (None: the processor
    inserts it), and where that came from."""
    from vlcheck import adapter

    try:
        cls = adapter.load_model_class(architecture)
    except Exception as err:  # not registered in this vLLM, or its import fails
        if base is None:
            return {}, f"vLLM could not load {architecture} ({type(err).__name__}: {str(err)[:120]})"
        variant = base.single or base.multi_image
        return ({m: p.text or None for m, p in variant.modalities.items()},
                f"the built-in family {base.name} (vLLM could not load {architecture})")
    taken = {m: adapter.takes_modality(cls, m) for m in MODALITIES}
    return ({m: _numbered(text, adapter.takes_modality(cls, m, 2)[1]) for m, (ok, text) in taken.items() if ok},
            f"what vLLM's chat API writes ({cls.__name__}.get_placeholder_str)")


def _numbered(first: str | None, second: str | None) -> str | None:
    """A placeholder that numbers its items (`<|image_1|>`, `<|image_2|>`) in the spec's form, `{i}`."""
    if first and second and first != second and first.replace("1", "{i}") == second.replace("2", "{i}"):
        return first.replace("1", "{i}")
    return first


def _base_engine_args(base: FamilySpec | None) -> list[str]:
    """The base family's example engine args, as a comment: what vLLM's example needed for it."""
    variant = base and (base.single or base.multi_image)
    if not variant or not variant.engine_args:
        return []
    args = ", ".join(f"{k} = {_toml(v)}" for k, v in variant.engine_args.items() if not isinstance(v, dict))
    nested = [k for k, v in variant.engine_args.items() if isinstance(v, dict)]
    return [f"# vLLM's example for {base.name} passes {args}" + (f" (and {', '.join(nested)}: `vlcheck show {base.name}`)"
                                                                 if nested else "")]


def _stops(assets: ModelAssets) -> tuple[list[int], str]:
    """generation_config.json's eos ids, with the token each names."""
    config = assets.json_or_none("generation_config.json")
    if config is None:
        return [], "no generation_config.json: vLLM stops on the tokenizer's eos token only"
    eos = config.get("eos_token_id")
    ids = [eos] if isinstance(eos, int) else [i for i in eos or [] if isinstance(i, int)]
    names = {v: k for k, v in assets.token_ids().items()}
    return ids, "generation_config.json eos_token_id: " + ", ".join(f"{i} = {names.get(i, '?')!r}" for i in ids)


def _template_lines(model: str, base: FamilySpec | None) -> tuple[list[str], bool]:
    """The `[single.prompt]` table, and whether it is the base family's hand-written prompt (whose
    placeholders then go with it)."""
    from vlcheck.prompt.templates import TemplateUnavailable, model_template

    try:
        template = model_template(model)
    except TemplateUnavailable as err:
        template, why = None, err.reason
    lines = ["", "[single.prompt]"]
    if template is not None:
        lines += [f"# The model's own chat template ({template.source}, sha256 {template.sha256[:12]}), as `vllm serve`",
                  "# uses it. If you serve with `--chat-template FILE`, name that file instead (relative to this spec):",
                  '# chat_template_file = "my-template.jinja"',
                  'chat_template = "tokenizer"']
        return lines, False
    hand = next((v.prompt.template for v in (base.variants if base else ()) if v.prompt.template), None)
    lines += [f"# No chat template found: {why}.",
              "# Name the template you serve with (`vllm serve --chat-template FILE`), relative to this spec:",
              '# chat_template_file = "my-template.jinja"']
    if hand is not None:
        lines += [f"# or write the prompt by hand; this one is {base.name}'s example prompt:", f"template = {_toml(hand)}"]
        return lines, True
    lines += ["# or write the prompt by hand, with {placeholder} and {question} slots:",
              'template = "{placeholder}\\n{question}"']
    return lines, False


def starter_spec(model: str, name: str, spec_dir: Path) -> str:
    """The text of a starter spec for `model` (a Hub id, or a folder as an absolute path), to be
    written as `spec_dir/<name>.toml`."""
    config = model_config(model)
    if config is None:
        from vlcheck.prompt.assets import fetch

        asset = fetch(model, "config.json")
        if not asset.found:
            raise ValueError(f"{model}: cannot read its config.json: {asset.why()}")
        config = asset.json()
    architecture = architecture_of(config)
    if architecture is None:
        raise ValueError(f"{model}: its config.json names no `architectures`")
    base = builtin_base(architecture, config.get("model_type"))
    assets = ModelAssets(model)
    placeholders, placeholder_source = _placeholders(architecture, base)
    stop_ids, stop_source = _stops(assets)
    written = model
    if local_dir(model) is not None:
        written = os.path.relpath(model, spec_dir)
        written = written if written.startswith("..") else "./" + written

    lines = [f"# vlcheck spec for {model}, written by `vlcheck init` (vlcheck {__version__}) from its config.json,",
             "# tokenizer files and chat template. Review every line, keep it in your repository, and run",
             f"# `vlcheck check --specs {spec_dir}`. The fields are documented in vlcheck/spec/schema.py.",
             f"name = {_toml(name)}  # must equal the file name",
             f"title = {_toml(Path(model.rstrip('/')).name)}"]
    if base is not None:
        lines += [f"# {architecture} is served like the built-in family {base.name}: its synthetic recipe (the",
                  "# processor and GPU checks without your weights) and placeholders are reused unless set here.",
                  f"base = {_toml(base.name)}"]
    else:
        lines += [f"# No built-in family serves {architecture}: without a [synthetic] recipe (see Recipe in",
                  "# vlcheck/spec/schema.py) the checks that need a checkpoint run only on a model folder with weights."]
    engine_args = "max_model_len = 4096" + (", trust_remote_code = true" if config.get("auto_map") else "")
    lines += ["", "[single]",
              "# A Hub id, or your model's folder (a relative path is read relative to this file).",
              f"model = {_toml(written)}",
              f"architecture = {_toml(architecture)}  # config.json architectures[0]",
              "# Engine args as you pass them to vLLM (`vllm serve` flags with _ for -)"
              + ("; trust_remote_code: config.json maps classes to the model's own code." if config.get("auto_map") else "."),
              *_base_engine_args(base),
              f"engine_args = {{ {engine_args} }}",
              'limit_mm_per_prompt = "one per modality"',
              "# How you serve it in production, kept for the served-path checks:",
              f"# serve = {_toml(f'vllm serve {model} --max-model-len 4096')}"]
    if stop_ids:
        lines += [f"# {stop_source}", f"stop_token_ids = {_toml(stop_ids)}"]
    else:
        lines += [f"# {stop_source}", "# stop_token_ids = []"]
    prompt, base_prompt = _template_lines(model, base)
    lines += prompt
    if base_prompt:
        variant = next(v for v in base.variants if v.prompt.template)
        placeholders = {m: p.text or None for m, p in variant.modalities.items()}
        placeholder_source = f"{base.name}'s, which its prompt above goes with"
    if placeholders:
        lines += ["", f"# The placeholder of one item of each modality: {placeholder_source}."]
    else:
        lines += ["", f"# vLLM names no modality for {architecture} ({placeholder_source}): declare yours."]
        placeholders = {"image": None}
    as_text = {m for v in (base.variants if base else ()) for m, p in v.modalities.items() if p.matched_as_text}
    for modality, text in placeholders.items():
        lines.append(f"[single.modalities.{modality}]")
        lines.append(f"placeholder = {_toml(text)}" if text else "implicit = true  # the processor inserts the media tokens")
        if text and modality in as_text:
            lines.append(f"matched_as_text = true  # as {base.name}'s: vLLM finds it by its text, not as one token")
    return "\n".join(lines) + "\n"


def write_starter(model: str, out: str | None, name: str | None, force: bool) -> tuple[Path, str]:
    """Write the starter spec; returns its path and the loader's verdict on it."""
    from vlcheck.spec.registry import SpecError, load_spec

    if Path(model).expanduser().is_dir():
        model = str(Path(model).expanduser().resolve())
    target = Path(out or ".").expanduser()
    if target.is_dir() or (out or "").endswith("/") or out is None:
        target = target / f"{name or family_name(model)}.toml"
    name = name or target.stem
    if target.stem != name:
        raise ValueError(f"{target}: a spec's file name is its name: {name}.toml")
    if target.exists() and not force:
        raise ValueError(f"{target} exists; pass --force to replace it")
    text = starter_spec(model, name, target.parent.resolve())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    try:
        spec = load_spec(target)
    except SpecError as err:
        return target, f"it does not load yet: {err}"
    variants = ", ".join(f"{v.kind} ({'/'.join(v.modalities)})" for v in spec.variants)
    return target, f"it loads: {variants}" + (f", based on {spec.base}" if spec.base else "")
