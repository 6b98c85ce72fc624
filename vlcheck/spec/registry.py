"""Find and load family specs: TOML files in `vlcheck/families/` (and any extra folders).

Adding a family means adding one file there; nothing else needs to change. Every error names
the file and the field (`SpecError`).
"""

from __future__ import annotations

import difflib
import os
import shlex
import string
import tomllib
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from vlcheck.core.devices import CPU_KERNEL_CLASSES
from vlcheck.spec.hostile_cases import CASES
from vlcheck.spec.schema import (
    CHECKS,
    Confusable,
    Declaration,
    KINDS,
    LIMIT_AUDIO_COUNT,
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
    USER_PROMPT,
    Variant,
    config_id,
)
from vlcheck.spec.models import architecture_of, is_path, local_dir, model_config, resolve_model

BUILTIN_SPEC_DIR = Path(__file__).parents[1] / "families"
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
                self.misspelt(key)
                raise SpecError(self.path, self.field(key), "missing (required)")
            return default
        value = self.table[key]
        if not _is_a(value, types):
            raise SpecError(self.path, self.field(key), f"expected {_names(types)}, got {_kind(value)}")
        return value

    def sub(self, key: str, required=False) -> "_Reader | None":
        value = self.get(key, dict, required=required)
        return None if value is None else _Reader(self.path, self.field(key), value)

    def misspelt(self, key: str) -> None:
        """A required key is missing: a key of the table close to it is its misspelling, and the
        error names that one (`single.modle: unknown key (did you mean 'model'?)`)."""
        typo = difflib.get_close_matches(key, [k for k in self.table if k not in self.used], n=1)
        if typo:
            raise SpecError(self.path, self.field(typo[0]), "unknown key" + _did_you_mean(typo[0], [key]))

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
    modalities = r.get("modalities", list, [])
    wrong = [m for m in modalities if m not in MODALITIES]
    if wrong:
        raise SpecError(r.path, r.field("modalities"), f"unknown modality {wrong[0]!r}; modalities are "
                        + ", ".join(MODALITIES))
    builds = r.get("vllm_builds", list, default=[])
    from vlcheck.core.versions import VLLM_BUILDS

    known = sorted(set(VLLM_BUILDS.values()))
    if any(b not in known for b in builds) or ("vllm_builds" in r.table and not builds):
        raise SpecError(r.path, r.field("vllm_builds"), f"a list of the vLLM builds it was measured on, of {known}")
    kernels = r.get("cpu_kernels", list, default=[])
    if any(k not in CPU_KERNEL_CLASSES for k in kernels) or ("cpu_kernels" in r.table and not kernels):
        raise SpecError(r.path, r.field("cpu_kernels"), "a list of the instruction-set classes of vLLM's CPU build it "
                        f"was measured on, of {list(CPU_KERNEL_CLASSES)}")
    if kernels and builds != ["cpu"]:
        raise SpecError(r.path, r.field("cpu_kernels"), "an instruction-set class scopes a declaration about vLLM's CPU "
                        "build: add vllm_builds = [\"cpu\"]")
    findings = r.get("findings", list, default=[])
    if any(not isinstance(f, str) or not f.strip() for f in findings) or ("findings" in r.table and not findings):
        raise SpecError(r.path, r.field("findings"), "a list of words the findings it covers contain, e.g. [\"reused uuid\"]")
    r.done()
    return Declaration(reason=reason, **ranges, modalities=tuple(modalities), vllm_builds=tuple(builds),
                       cpu_kernels=tuple(kernels), findings=tuple(findings))


def _read_prompt(r: _Reader) -> Prompt:
    template = _text_or_file(r, "template")
    explicit = _text_or_file(r, "explicit_chat_template", "chat_template_file")
    prompt = Prompt(
        template=template,
        chat_template=r.get("chat_template", str, "tokenizer" if explicit is not None and template is None else None),
        content=r.get("content", str, "parts"),
        system=r.get("system", str),
        explicit_chat_template=explicit,
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


def _text_or_file(r: _Reader, key: str, file_key: str | None = None) -> str | None:
    """A text given inline (`key`) or as a file relative to the spec (`key_file`), not both."""
    file_key = file_key or f"{key}_file"
    text, name = r.get(key, str), r.get(file_key, str)
    if name is None:
        return text
    if text is not None:
        raise SpecError(r.path, r.field(file_key), f"set `{key}` or `{file_key}`, not both")
    path = (r.path.parent / Path(name).expanduser()).resolve()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(r.path, r.field(file_key), f"cannot read {path}: {err.strerror or err}") from None


def _read_modality(r: _Reader) -> MediaPlaceholder:
    part = r.get("content_part", dict)
    m = MediaPlaceholder(
        text=r.get("placeholder", str, ""),
        separator=r.get("separator", str, ""),
        content_part=part,
        engine_args=r.get("engine_args", dict, {}),
        implicit=r.get("implicit", bool, False),
        video_metadata=r.get("video_metadata", bool, False),
        matched_as_text=r.get("matched_as_text", bool, False),
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


def _read_variant(r: _Reader, kind: str, base_name: str | None) -> tuple[Variant, FamilySpec | None]:
    """One variant, and (a user's spec, without `source`) the built-in family it is based on."""
    source, model, revision, architecture, base = _read_model(r, base_name)
    inherited = _base_variant(base, kind)
    prompt_r = r.sub("prompt", required=source is not None)
    prompt = _read_prompt(prompt_r) if prompt_r is not None else USER_PROMPT
    modalities = _read_modalities(r, inherited)
    if kind == "multi_image" and set(modalities) != {"image"}:
        raise SpecError(r.path, r.field("modalities"), "a multi_image variant has exactly the `image` modality")
    if (kind == "audio") != ("audio" in modalities) or (kind == "audio" and set(modalities) != {"audio"}):
        raise SpecError(r.path, r.field("modalities"), "the `audio` variant (audio_language.py's example) has exactly "
                        "the `audio` modality, and only it has audio")
    _check_placeholder_use(prompt, modalities, r)

    limit = r.get("limit_mm_per_prompt", (str, dict), inherited.limit_mm_per_prompt if inherited else None)
    if isinstance(limit, str) and limit not in (LIMIT_ONE_PER_MODALITY, LIMIT_IMAGE_COUNT, LIMIT_AUDIO_COUNT):
        raise SpecError(r.path, r.field("limit_mm_per_prompt"),
                        f"expected {LIMIT_ONE_PER_MODALITY!r}, {LIMIT_IMAGE_COUNT!r}, {LIMIT_AUDIO_COUNT!r} or a table")
    engine_args = r.get("engine_args", dict, {})
    for banned in ("model", "limit_mm_per_prompt"):
        if banned in engine_args:
            raise SpecError(r.path, r.field(f"engine_args.{banned}"), f"set `{banned}` on the variant, not in engine_args")

    lora = _read_lora(r)
    drifts = _read_drifts(r)

    deviations, known_broken = _read_deviations(r, modalities, inherited)

    stop_ids, stop_tokens, max_images, max_audios = _read_stops_and_images(r, kind, inherited)

    variant = Variant(
        kind=kind,  # type: ignore[arg-type]
        source=source,
        model=model,
        architecture=architecture,
        prompt=prompt,
        modalities=modalities,
        engine_args=engine_args,
        limit_mm_per_prompt=limit,
        stop_token_ids=_optional_tuple(stop_ids),
        stop_tokens=_optional_tuple(stop_tokens),
        drop_unknown_stop_tokens=r.get("drop_unknown_stop_tokens", bool, False),
        stop_eos_token=r.get("stop_eos_token", bool, False),
        sampling=r.get("sampling", dict),
        lora=lora,
        model_from_snapshot=r.get("model_from_snapshot", bool, False),
        revision=revision,
        max_images=max_images,
        max_audios=max_audios,
        notes=tuple(r.get("notes", list, [])),
        drifts=tuple(drifts),
        deviations=deviations,
        known_broken=known_broken,
        serve=_read_serve(r),
    )
    r.done()
    overridden = (engine_args.get("hf_overrides") or {}).get("architectures")
    if overridden and overridden[0] != variant.architecture:
        raise SpecError(r.path, r.field("architecture"),
                        f"{variant.architecture!r} disagrees with engine_args.hf_overrides.architectures {overridden!r}")
    return variant, base


def _read_model(r: _Reader, base_name: str | None):
    """(source, model, revision, architecture, base family): a user's spec without `source` takes
    what it leaves out from the model's config and the built-in family of its architecture."""
    src = r.sub("source")
    source = None
    if src is not None:
        source = Source(seed=src.get("seed", str, required=True), function=src.get("function", str, required=True))
        src.done()
    model = resolve_model(r.get("model", str, required=True), r.path)
    revision = r.get("revision", str)
    architecture = r.get("architecture", str, required=source is not None)
    base = None
    if source is None:  # a user's own model: what it leaves out comes from its config and a built-in family
        config = model_config(model, revision)
        if architecture is None:
            architecture = architecture_of(config)
        if architecture is None:
            where = ("its folder has no readable config.json" if local_dir(model) else "no such folder" if is_path(model)
                     else "its config.json is not in the HF cache")
            raise SpecError(r.path, r.field("architecture"), f"missing, and {model}: {where}; set `architecture`")
        base = _builtin_base(r.path, base_name, architecture, (config or {}).get("model_type"))
    return source, model, revision, architecture, base


def _read_lora(r: _Reader) -> Lora | None:
    lora_r = r.sub("lora")
    lora = None
    if lora_r is not None:
        lora = Lora(name=lora_r.get("name", str, required=True), id=lora_r.get("id", int, required=True),
                    path_in_snapshot=lora_r.get("path_in_snapshot", str, required=True))
        lora_r.done()
    return lora


def _read_drifts(r: _Reader) -> list[Drift]:
    drifts = []
    for i, table in enumerate(r.get("drifts", list, [])):
        d = _Reader(r.path, r.field(f"drifts[{i}]"), table)
        drift = Drift(seed=d.get("seed", str, required=True), function=d.get("function", str, required=True),
                      kind=d.get("kind", str, required=True), note=d.get("note", str, required=True),
                      template=d.get("template", str), content=d.get("content", str),
                      engine_args=d.get("engine_args", dict),
                      stop_tokens=_optional_tuple(d.get("stop_tokens", list)))
        d.done()
        if drift.kind not in _DRIFT_KINDS:
            raise SpecError(r.path, d.field("kind"), f"expected one of {', '.join(_DRIFT_KINDS)}")
        drifts.append(drift)
    return drifts


def _optional_tuple(items: list | None) -> tuple | None:
    return tuple(items) if items is not None else None


def _read_deviations(r: _Reader, modalities: dict, inherited: Variant | None) -> tuple[dict, dict]:
    """The declared deviations (per check) and known-broken hostile cases (the base family's too)."""
    deviations = _read_declarations(r, "deviations", list(CHECKS),
                                    lambda name: f"unknown check; checks are {', '.join(CHECKS)}")
    for name, declared in deviations.items():
        absent = [m for m in declared.modalities if m not in modalities]
        if absent:
            raise SpecError(r.path, r.field(f"deviations.{name}.modalities"),
                            f"{absent[0]!r} is not a modality of this example ({', '.join(modalities)})")
    cases = [c.name for c in CASES]
    known_broken = _read_declarations(r, "known_broken", cases,
                                      lambda name: f"unknown hostile-input case{_did_you_mean(name, cases)}")
    if inherited is not None:  # how vLLM's processor takes bad input is the architecture's: the base family's
        known_broken = {**inherited.known_broken, **known_broken}  # measured breakages hold for a fine-tune too
    return deviations, known_broken


def _read_stops_and_images(r: _Reader, kind: str, inherited: Variant | None):
    """(stop_token_ids, stop_tokens, max_images, max_audios), each checked."""
    stop_ids = r.get("stop_token_ids", list)
    stop_tokens = r.get("stop_tokens", list)
    for key, values, typ in (("stop_token_ids", stop_ids, int), ("stop_tokens", stop_tokens, str)):
        if values is not None and not all(_is_a(v, typ) for v in values):
            raise SpecError(r.path, r.field(key), f"expected an array of {_names(typ)}s")
    max_images = r.get("max_images", int, inherited.max_images if inherited and kind == "multi_image" else None)
    if kind == "multi_image" and (max_images is None or max_images < 1):
        raise SpecError(r.path, r.field("max_images"), "a multi_image variant needs max_images >= 1")
    if kind != "multi_image" and max_images is not None:
        raise SpecError(r.path, r.field("max_images"), "only a multi_image variant sends several images")
    max_audios = r.get("max_audios", int, inherited.max_audios if inherited and kind == "audio" else None)
    if kind == "audio" and (max_audios is None or max_audios < 1):
        raise SpecError(r.path, r.field("max_audios"), "an audio variant needs max_audios >= 1 (the most clips its "
                        "example sends in one prompt)")
    if kind != "audio" and max_audios is not None:
        raise SpecError(r.path, r.field("max_audios"), "only an audio variant sends audio clips")
    return stop_ids, stop_tokens, max_images, max_audios


def _read_modalities(r: _Reader, inherited: Variant | None) -> dict[str, MediaPlaceholder]:
    """The `modalities` table; absent, the base family's (a user's spec)."""
    mods_r = r.sub("modalities", required=inherited is None)
    if mods_r is None:
        return dict(inherited.modalities)
    modalities = {}
    for name in mods_r.table:
        if name not in MODALITIES:
            raise SpecError(r.path, mods_r.field(name), f"unknown modality; known: {', '.join(MODALITIES)}")
        modalities[name] = _read_modality(mods_r.sub(name))
    mods_r.done()
    if not modalities:
        raise SpecError(r.path, mods_r.where, "declare at least one modality")
    return modalities


def _read_serve(r: _Reader) -> tuple[str, ...] | None:
    """`serve`: a `vllm serve ...` command line, as one string or an array of its arguments."""
    line = r.get("serve", (str, list))
    if line is None:
        return None
    if isinstance(line, str):
        try:
            line = shlex.split(line)
        except ValueError as err:
            raise SpecError(r.path, r.field("serve"), f"not a command line: {err}") from None
    elif not all(_is_a(arg, str) for arg in line):
        raise SpecError(r.path, r.field("serve"), "expected a command line: a string, or an array of strings")
    if not line:
        raise SpecError(r.path, r.field("serve"), 'empty; write the command as you run it: "vllm serve MODEL --flag ..."')
    return tuple(line)


def _builtin_base(path: Path, name: str | None, architecture: str, model_type: str | None) -> FamilySpec | None:
    """The built-in family a user's spec reuses: the one it names (`base`), else `builtin_base`."""
    if name is None:
        return builtin_base(architecture, model_type)
    builtins = all_families((BUILTIN_SPEC_DIR,))
    if name not in builtins:
        raise SpecError(path, "base", str(UnknownFamily(name, builtins)))
    return builtins[name]


def builtin_base(architecture: str, model_type: str | None) -> FamilySpec | None:
    """The built-in family serving `architecture`, preferring a buildable synthetic recipe of the
    same model_type (None when no built-in family serves it)."""
    builtins = all_families((BUILTIN_SPEC_DIR,))

    def rank(spec: FamilySpec):
        recipe = spec.synthetic
        return (recipe is None or recipe.unsupported is not None, recipe is None or recipe.model_type != model_type, spec.name)

    serving = [s for s in builtins.values() if any(v.architecture == architecture for v in s.variants)]
    return min(serving, key=rank, default=None)


def _base_variant(base: FamilySpec | None, kind: str) -> Variant | None:
    if base is None:
        return None
    if kind == "audio":
        return base.audio
    return (base.multi_image if kind == "multi_image" else None) or base.single or base.multi_image


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
    base_name = r.get("base", str)
    variants, bases = {}, []
    for kind in KINDS:
        sub = r.sub(kind)
        if sub is not None:
            variants[kind], base = _read_variant(sub, kind, base_name)
            bases += [base] if base is not None else []
    r.done()
    if not variants:
        raise SpecError(path, "single", "a family needs a `single`, `multi_image` or `audio` variant")
    base = bases[0] if bases else None
    if synthetic is None and base is not None:
        synthetic = base.synthetic
    return FamilySpec(name=name, title=title, path=str(path), synthetic=synthetic, base=base.name if base else None,
                      **variants)


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
        hub_remote_code=r.get("hub_remote_code", bool, False),
        remote_code=r.get("remote_code", dict, {}),
        saved_config_keys=r.get("saved_config_keys", dict, {}),
        tokenizer=r.get("tokenizer", dict, {}),
        vocabulary_map=r.get("vocabulary_map", str),
        unsupported=r.get("unsupported", str),
        confusable=_read_confusable(r.sub("confusable")),
    )
    r.done()
    if recipe.model_type is None and recipe.unsupported is None and not recipe.hub_remote_code:
        raise SpecError(r.path, r.field("model_type"),
                        "set the transformers model_type, `hub_remote_code = true`, or `unsupported` with the reason")
    return recipe


def _read_confusable(r: _Reader | None) -> Confusable | None:
    if r is None:
        return None
    reason = r.get("reason", str, required=True)
    if not reason.strip():
        raise SpecError(r.path, r.field("reason"), "say which fields it tells apart, and where each is read")
    confusable = Confusable(reason=reason, config=r.get("config", dict, {}), processor=r.get("processor", dict, {}),
                            image_processor=r.get("image_processor", dict, {}),
                            video_processor=r.get("video_processor", dict, {}))
    r.done()
    if not (confusable.config or confusable.processor or confusable.image_processor or confusable.video_processor):
        raise SpecError(r.path, r.field("config"), "give the overrides that tell the fields apart (config, processor, "
                        "image_processor, video_processor)")
    return confusable


def user_spec_dirs() -> list[Path]:
    """The user's spec folders (`--specs DIR`, or VLCHECK_SPEC_PATH), in order."""
    return [Path(p).expanduser().resolve() for p in os.environ.get(SPEC_PATH_ENV, "").split(os.pathsep) if p]


def add_spec_dirs(dirs: Iterable[str | Path]) -> None:
    """Add folders to VLCHECK_SPEC_PATH (what `--specs DIR` does), so that child processes (pytest
    workers, guarded children) see the same specs. Raises ValueError naming a folder that is not one."""
    dirs = [Path(d).expanduser().resolve() for d in dirs]
    if not dirs:
        return
    for d in dirs:
        if not d.is_dir():
            raise ValueError(f"--specs {d}: no such folder")
    known = [str(d) for d in user_spec_dirs()]
    os.environ[SPEC_PATH_ENV] = os.pathsep.join(dict.fromkeys([*known, *map(str, dirs)]))


def spec_dirs() -> list[Path]:
    return [BUILTIN_SPEC_DIR, *user_spec_dirs()]


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


def family_and_config_names() -> set[str]:
    """Every family whose spec loads, and each of its family-configs (`qwen2_vl`, `qwen2_vl-single`):
    what a choice of places may name (`--vlcheck-config NAME@WHERE`)."""
    return {place for name, spec in all_families().items() for place in (name, *(config_id(spec, v) for v in spec.variants))}


def spec_errors(dirs: Iterable[Path] | None = None) -> dict[str, SpecError]:
    """The spec files that do not load, by family (file) name, with the loader's error."""
    return _load_all(tuple(dirs) if dirs is not None else tuple(spec_dirs()))[1]


def default_selection() -> list[str]:
    """The families a run checks when none is named: with user spec folders, the families
    defined there (built-in ones by name only: `--family NAME`); otherwise every built-in one.
    Those whose spec does not load are included: their checks say why."""
    names = [*all_families(), *spec_errors()]
    users = user_spec_dirs()
    if users:
        where = {**{n: s.path for n, s in all_families().items()}, **{n: e.path for n, e in spec_errors().items()}}
        names = [n for n in names if Path(where[n]).resolve().parent in users]
    return sorted(names, key=str.lower)


def get_family(name: str, dirs: Iterable[Path] | None = None) -> FamilySpec:
    families = all_families(dirs)
    broken = spec_errors(dirs)
    if name in broken:
        raise broken[name]
    if name not in families:
        raise UnknownFamily(name, families)
    return families[name]
