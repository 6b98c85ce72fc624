"""Find and load family specs: TOML files in `vlcheck/specs/` (and any extra folders).

Adding a family means adding one file there; nothing else needs to change. Every error names
the file and the field (`SpecError`).
"""

from __future__ import annotations

import difflib
import os
import string
import tomllib
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from vlcheck.spec.hostile_cases import CASES
from vlcheck.spec.schema import (
    CHECKS,
    Declaration,
    LIMIT_IMAGE_COUNT,
    LIMIT_ONE_PER_MODALITY,
    MODALITIES,
    PARTS,
    PARTS_TEXT_FIRST,
    PROMPT_SLOTS,
    Drift,
    FamilySpec,
    Lora,
    MediaPlaceholder,
    Prompt,
    Recipe,
    Source,
    Variant,
)

BUILTIN_SPEC_DIR = Path(__file__).parents[1] / "specs"
SPEC_PATH_ENV = "VLCHECK_SPEC_PATH"
"""Extra spec folders, separated by os.pathsep; a file there overrides a built-in of that name."""


class SpecError(ValueError):
    """A spec file is invalid. The message names the file and the field."""

    def __init__(self, path: str | Path, field: str, problem: str):
        self.path, self.field, self.problem = str(path), field, problem
        super().__init__(f"{path}: {field}: {problem}")


class UnknownFamily(KeyError):
    def __init__(self, name: str, known: Iterable[str]):
        self.name = name
        self.close = difflib.get_close_matches(name, list(known), n=5, cutoff=0.5)
        super().__init__(name)

    def __str__(self) -> str:
        hint = f"; did you mean: {', '.join(self.close)}" if self.close else ""
        return f"unknown family {self.name!r}{hint} (see `vlcheck list`)"


class _Reader:
    """Typed access to one TOML table; remembers the dotted path for error messages."""

    def __init__(self, path: Path, where: str, table: Any):
        self.path, self.where = path, where
        if not isinstance(table, dict):
            raise SpecError(path, where or "(top level)", f"expected a table, got {_kind(table)}")
        self.table = table
        self.used: set[str] = set()

    def field(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, types: type | tuple[type, ...], default: Any = None, required=False):
        self.used.add(key)
        if key not in self.table:
            if required:
                raise SpecError(self.path, self.field(key), "missing (required)")
            return default
        value = self.table[key]
        if not _is_a(value, types):
            raise SpecError(self.path, self.field(key), f"expected {_names(types)}, got {_kind(value)}")
        return value

    def sub(self, key: str, required=False) -> "_Reader | None":
        value = self.get(key, dict, required=required)
        return None if value is None else _Reader(self.path, self.field(key), value)

    def done(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise SpecError(self.path, self.field(unknown[0]), "unknown key" + _did_you_mean(unknown[0], self.used))


def _is_a(value: Any, types: type | tuple[type, ...]) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):  # bool is an int in Python; never accept one for the other
        return bool in types
    return isinstance(value, types)


def _did_you_mean(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _kind(value: Any) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a float"}.get(type(value), type(value).__name__)


def _names(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(_kind(t()) if t in (dict, list, str, bool, int, float) else t.__name__ for t in types)


def template_slots(text: str, path: Path, field: str) -> set[str]:
    """The `{slot}` names a template uses; unknown slots and bad braces are spec errors."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as e:
        raise SpecError(path, field, f"bad braces in template ({e}); write literal braces as {{{{ }}}}")
    unknown = names - set(PROMPT_SLOTS)
    if unknown:
        slot = sorted(unknown)[0]
        raise SpecError(path, field, f"unknown slot {{{slot}}}; slots are " + ", ".join(f"{{{s}}}" for s in PROMPT_SLOTS))
    return names


def _read_declarations(r, table: str, names: list[str], unknown) -> dict[str, Declaration]:
    """A variant's `deviations` or `known_broken` table: each entry's name must be one of `names`
    (`unknown(name)` words the error otherwise), its value a Declaration."""
    sub = r.sub(table)
    out = {}
    for name in sub.table if sub else ():
        if name not in names:
            raise SpecError(r.path, sub.field(name), unknown(name))
        out[name] = _read_declaration(sub, name)
    return out


def _read_declaration(parent: _Reader, key: str) -> Declaration:
    """A `deviations` or `known_broken` entry: a table with the reason and the measured versions."""
    if not isinstance(parent.table[key], dict):
        raise SpecError(parent.path, parent.field(key),
                        "expected a table: reason = \"...\", vllm = \">=0.24.0,<=0.32.0\", transformers = \"...\" "
                        "(the versions it was measured on)")
    r = parent.sub(key)
    reason = r.get("reason", str, required=True)
    if not reason.strip():
        raise SpecError(r.path, r.field("reason"), "give the reason as a non-empty string")
    ranges = {}
    for dist in ("vllm", "transformers"):
        text = r.get(dist, str, required=True)
        if not text.strip():
            raise SpecError(r.path, r.field(dist), "state the versions it was measured on, e.g. \"==0.24.0\"")
        try:
            SpecifierSet(text)
        except InvalidSpecifier as err:
            raise SpecError(r.path, r.field(dist), f"not a version range like \">=0.24.0,<=0.32.0\": {err}") from None
        ranges[dist] = text
    builds = r.get("vllm_builds", list, default=[])
    from vlcheck.core.versions import VLLM_BUILDS

    known = sorted(set(VLLM_BUILDS.values()))
    if any(b not in known for b in builds) or ("vllm_builds" in r.table and not builds):
        raise SpecError(r.path, r.field("vllm_builds"), f"a list of the vLLM builds it was measured on, of {known}")
    r.done()
    return Declaration(reason=reason, **ranges, vllm_builds=tuple(builds))


def _read_prompt(r: _Reader) -> Prompt:
    prompt = Prompt(
        template=r.get("template", str),
        chat_template=r.get("chat_template", str),
        content=r.get("content", str, "parts"),
        system=r.get("system", str),
        explicit_chat_template=r.get("explicit_chat_template", str),
    )
    r.done()
    if (prompt.template is None) == (prompt.chat_template is None):
        raise SpecError(r.path, r.where, "set exactly one of `template` (hand-written) and `chat_template`")
    if prompt.chat_template not in (None, "tokenizer", "processor"):
        raise SpecError(r.path, r.field("chat_template"), "expected \"tokenizer\" or \"processor\"")
    for key in ("template", "content"):
        text = getattr(prompt, key)
        if text is not None and text not in (PARTS, PARTS_TEXT_FIRST):
            template_slots(text, r.path, r.field(key))
    return prompt


def _read_modality(r: _Reader) -> MediaPlaceholder:
    part = r.get("content_part", dict)
    m = MediaPlaceholder(
        text=r.get("placeholder", str, ""),
        separator=r.get("separator", str, ""),
        content_part=part,
        engine_args=r.get("engine_args", dict, {}),
        implicit=r.get("implicit", bool, False),
        video_metadata=r.get("video_metadata", bool, False),
    )
    r.done()
    if part is not None and part.get("type") not in MODALITIES:
        raise SpecError(r.path, r.field("content_part"), "needs `type` = one of " + ", ".join(MODALITIES))
    return m


def _check_placeholder_use(prompt: Prompt, modalities: dict[str, MediaPlaceholder], r: _Reader) -> None:
    text = prompt.template if prompt.template is not None else prompt.content
    parts = text in (PARTS, PARTS_TEXT_FIRST)
    uses_slot = not parts and "placeholder" in template_slots(text, r.path, "")
    where = r.field("prompt.template" if prompt.template is not None else "prompt.content")
    for name, m in modalities.items():
        if not m.text and not m.implicit and not parts:
            raise SpecError(r.path, r.field(f"modalities.{name}.placeholder"),
                            "missing placeholder (set `implicit = true` if the processor inserts it)")
        if m.implicit and uses_slot:
            raise SpecError(r.path, where, f"uses {{placeholder}} but modality {name!r} is `implicit`")
        if not m.implicit and not parts and not uses_slot:
            raise SpecError(r.path, where, f"missing placeholder: no {{placeholder}} slot for modality {name!r}")


def _read_variant(r: _Reader, kind: str) -> Variant:
    src = r.sub("source", required=True)
    source = Source(seed=src.get("seed", str, required=True), function=src.get("function", str, required=True))
    src.done()
    prompt = _read_prompt(r.sub("prompt", required=True))
    mods_r = r.sub("modalities", required=True)
    modalities = {}
    for name in mods_r.table:
        if name not in MODALITIES:
            raise SpecError(r.path, mods_r.field(name), f"unknown modality; known: {', '.join(MODALITIES)}")
        modalities[name] = _read_modality(mods_r.sub(name))
    mods_r.done()
    if not modalities:
        raise SpecError(r.path, mods_r.where, "declare at least one modality")
    if kind == "multi_image" and set(modalities) != {"image"}:
        raise SpecError(r.path, mods_r.where, "a multi_image variant has exactly the `image` modality")
    _check_placeholder_use(prompt, modalities, r)

    limit = r.get("limit_mm_per_prompt", (str, dict))
    if isinstance(limit, str) and limit not in (LIMIT_ONE_PER_MODALITY, LIMIT_IMAGE_COUNT):
        raise SpecError(r.path, r.field("limit_mm_per_prompt"),
                        f"expected {LIMIT_ONE_PER_MODALITY!r}, {LIMIT_IMAGE_COUNT!r} or a table")
    engine_args = r.get("engine_args", dict, {})
    for banned in ("model", "limit_mm_per_prompt"):
        if banned in engine_args:
            raise SpecError(r.path, r.field(f"engine_args.{banned}"), f"set `{banned}` on the variant, not in engine_args")

    lora_r = r.sub("lora")
    lora = None
    if lora_r is not None:
        lora = Lora(name=lora_r.get("name", str, required=True), id=lora_r.get("id", int, required=True),
                    path_in_snapshot=lora_r.get("path_in_snapshot", str, required=True))
        lora_r.done()

    drifts = []
    for i, table in enumerate(r.get("drifts", list, [])):
        d = _Reader(r.path, r.field(f"drifts[{i}]"), table)
        drift = Drift(seed=d.get("seed", str, required=True), function=d.get("function", str, required=True),
                      kind=d.get("kind", str, required=True), note=d.get("note", str, required=True),
                      template=d.get("template", str), content=d.get("content", str),
                      engine_args=d.get("engine_args", dict))
        d.done()
        if drift.kind not in _DRIFT_KINDS:
            raise SpecError(r.path, d.field("kind"), f"expected one of {', '.join(_DRIFT_KINDS)}")
        drifts.append(drift)

    deviations = _read_declarations(r, "deviations", list(CHECKS),
                                    lambda name: f"unknown check; checks are {', '.join(CHECKS)}")
    cases = [c.name for c in CASES]
    known_broken = _read_declarations(r, "known_broken", cases,
                                      lambda name: f"unknown hostile-input case{_did_you_mean(name, cases)}")

    stop_ids = r.get("stop_token_ids", list)
    stop_tokens = r.get("stop_tokens", list)
    for key, values, typ in (("stop_token_ids", stop_ids, int), ("stop_tokens", stop_tokens, str)):
        if values is not None and not all(_is_a(v, typ) for v in values):
            raise SpecError(r.path, r.field(key), f"expected an array of {_names(typ)}s")
    max_images = r.get("max_images", int)
    if kind == "multi_image" and (max_images is None or max_images < 1):
        raise SpecError(r.path, r.field("max_images"), "a multi_image variant needs max_images >= 1")
    if kind == "single" and max_images is not None:
        raise SpecError(r.path, r.field("max_images"), "only a multi_image variant sends several images")

    variant = Variant(
        kind=kind,  # type: ignore[arg-type]
        source=source,
        model=r.get("model", str, required=True),
        architecture=r.get("architecture", str, required=True),
        prompt=prompt,
        modalities=modalities,
        engine_args=engine_args,
        limit_mm_per_prompt=limit,
        stop_token_ids=tuple(stop_ids) if stop_ids is not None else None,
        stop_tokens=tuple(stop_tokens) if stop_tokens is not None else None,
        drop_unknown_stop_tokens=r.get("drop_unknown_stop_tokens", bool, False),
        stop_eos_token=r.get("stop_eos_token", bool, False),
        sampling=r.get("sampling", dict),
        lora=lora,
        model_from_snapshot=r.get("model_from_snapshot", bool, False),
        revision=r.get("revision", str),
        max_images=max_images,
        notes=tuple(r.get("notes", list, [])),
        drifts=tuple(drifts),
        deviations=deviations,
        known_broken=known_broken,
    )
    r.done()
    overridden = (engine_args.get("hf_overrides") or {}).get("architectures")
    if overridden and overridden[0] != variant.architecture:
        raise SpecError(r.path, r.field("architecture"),
                        f"{variant.architecture!r} disagrees with engine_args.hf_overrides.architectures {overridden!r}")
    return variant


_DRIFT_KINDS = typing.get_args(typing.get_type_hints(Drift)["kind"])


def load_spec(path: str | Path) -> FamilySpec:
    """Read and validate one spec file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, "(syntax)", str(e)) from None
    r = _Reader(path, "", data)
    name = r.get("name", str, required=True)
    if name != path.stem:
        raise SpecError(path, "name", f"{name!r} must equal the file name {path.stem!r}")
    title = r.get("title", str, name)
    synthetic = _read_recipe(r.sub("synthetic"))
    variants = {}
    for kind in ("single", "multi_image"):
        sub = r.sub(kind)
        if sub is not None:
            variants[kind] = _read_variant(sub, kind)
    r.done()
    if not variants:
        raise SpecError(path, "single", "a family needs a `single` or a `multi_image` variant")
    return FamilySpec(name=name, title=title, path=str(path), synthetic=synthetic, **variants)


def _read_recipe(r: _Reader | None) -> Recipe | None:
    if r is None:
        return None
    recipe = Recipe(
        model_type=r.get("model_type", str),
        config=r.get("config", dict, {}),
        token_ids=r.get("token_ids", dict, {}),
        tokens=tuple(r.get("tokens", list, [])),
        processor=r.get("processor", dict, {}),
        processor_class=r.get("processor_class", str),
        image_processor_class=r.get("image_processor_class", str),
        image_processor=r.get("image_processor", dict, {}),
        video_processor_class=r.get("video_processor_class", str),
        video_processor=r.get("video_processor", dict, {}),
        token_positions=r.get("token_positions", dict, {}),
        config_class=r.get("config_class", str),
        remote_code=r.get("remote_code", dict, {}),
        saved_config_keys=r.get("saved_config_keys", dict, {}),
        tokenizer=r.get("tokenizer", dict, {}),
        vocabulary_map=r.get("vocabulary_map", str),
        unsupported=r.get("unsupported", str),
    )
    r.done()
    if recipe.model_type is None and recipe.unsupported is None:
        raise SpecError(r.path, r.field("model_type"), "set the transformers model_type, or `unsupported` with the reason")
    return recipe


def spec_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(SPEC_PATH_ENV, "").split(os.pathsep) if p]
    return [BUILTIN_SPEC_DIR, *extra]


@lru_cache(maxsize=None)
def _load_all(dirs: tuple[Path, ...]) -> tuple[dict[str, FamilySpec], dict[str, SpecError]]:
    """Every spec that loads, and the error of every one that does not (by file stem): a broken
    spec costs its own family only."""
    found: dict[str, FamilySpec] = {}
    broken: dict[str, SpecError] = {}
    for d in dirs:
        for path in sorted(d.glob("*.toml")):
            try:
                spec = load_spec(path)
            except SpecError as err:
                broken[path.stem] = err
                found.pop(path.stem, None)
                continue
            broken.pop(spec.name, None)
            found[spec.name] = spec
    by_name = lambda kv: kv[0].lower()  # noqa: E731
    return dict(sorted(found.items(), key=by_name)), dict(sorted(broken.items(), key=by_name))


def all_families(dirs: Iterable[Path] | None = None) -> dict[str, FamilySpec]:
    """Every family spec that loads, by name, sorted case-insensitively."""
    return _load_all(tuple(dirs) if dirs is not None else tuple(spec_dirs()))[0]


def spec_errors(dirs: Iterable[Path] | None = None) -> dict[str, SpecError]:
    """The spec files that do not load, by family (file) name, with the loader's error."""
    return _load_all(tuple(dirs) if dirs is not None else tuple(spec_dirs()))[1]


def get_family(name: str, dirs: Iterable[Path] | None = None) -> FamilySpec:
    families = all_families(dirs)
    broken = spec_errors(dirs)
    if name in broken:
        raise broken[name]
    if name not in families:
        raise UnknownFamily(name, families)
    return families[name]
