"""Run vLLM's example functions from the seed files, with vLLM and transformers stubbed out.

This is the suite's second, independent reading of the examples: instead of trusting a spec, it
executes the example's own code (its f-strings, joins and engine-arg literals) and records what
the function produced. Tests compare specs against it; `Drift` records are checked against the
older seeds the same way. Nothing is imported from vLLM and nothing is downloaded: every import
the example makes resolves to a recorder.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import re
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

SEEDS_ENV = "VLCHECK_SEEDS_DIR"
DEFAULT_SEEDS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"

_STUBBED = ("vllm", "transformers", "huggingface_hub", "PIL")
_MISSING = ("qwen_vl_utils",)  # optional helpers the examples fall back without


def seeds_dir() -> Path:
    return Path(os.environ.get(SEEDS_ENV, DEFAULT_SEEDS_DIR))


NEWER_SINGLE = "newer/vision_language.py"
"""vLLM's later single-image example script, the newest source of the families it has."""


def seed_file(seed: str) -> Path | None:
    """A seed by its id (`"000"`: `000_*.txt` in the seeds folder), or an example script by its path:
    as given, else inside the seeds folder (`newer/vision_language.py`, as specs name it)."""
    if seed.endswith(".py"):
        path = Path(seed)
        if not path.is_file() and not path.is_absolute():
            path = seeds_dir() / seed
        return path if path.is_file() else None
    found = sorted(seeds_dir().glob(f"{seed}_*.txt"))
    return found[0] if found else None


@dataclass(frozen=True)
class Ref:
    """A name the example imported from a stubbed package (e.g. a logits-processor class)."""

    qualname: str

    def __call__(self, *args, **kwargs):
        return Call(self.qualname, args, kwargs)

    def __getattr__(self, name: str) -> "Ref":
        if name.startswith("__"):
            raise AttributeError(name)
        return Ref(f"{self.qualname}.{name}")


@dataclass
class Call:
    """A recorded call of a stubbed class (`EngineArgs(...)`, `SamplingParams(...)`, ...)."""

    qualname: str
    args: tuple
    kwargs: dict[str, Any]

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class StopTokenOf:
    """The id a tokenizer would give a token string: unresolved here, resolved by the checks."""

    token: str


EOS_TOKEN_ID = "tokenizer.eos_token_id"


@dataclass
class ChatCall:
    """One `apply_chat_template` call: whose, with which messages and template."""

    owner: str  # "tokenizer" | "processor"
    model: str
    messages: Any
    kwargs: dict[str, Any]


class _Templater:
    """Stands in for AutoTokenizer/AutoProcessor.from_pretrained(...)."""

    def __init__(self, owner: str, model: str, calls: list[ChatCall]):
        self.owner, self.model, self.calls = owner, model, calls
        self.eos_token_id = EOS_TOKEN_ID

    def apply_chat_template(self, messages, **kwargs):
        batched = bool(messages) and isinstance(messages[0], list)
        convs = messages if batched else [messages]
        out = []
        for conv in convs:
            self.calls.append(ChatCall(self.owner, self.model, conv, kwargs))
            out.append(f"<chat#{len(self.calls) - 1}>")
        return out if batched else out[0]

    def convert_tokens_to_ids(self, token: str):
        return StopTokenOf(token)


class _Auto:
    def __init__(self, owner: str, calls: list[ChatCall]):
        self.owner, self.calls = owner, calls

    def from_pretrained(self, model, **_):
        return _Templater(self.owner, model, self.calls)


@dataclass
class ExampleRun:
    """What one example function returned, with its vLLM objects as recorded calls."""

    engine_args: dict[str, Any]
    prompts: list[str]
    chat_calls: list[ChatCall]
    stop_token_ids: list[Any] | None
    lora_requests: list[Call] | None
    sampling_params: list[Call] | None
    chat_template: str | None = None


class _StubModule(types.ModuleType):
    def __init__(self, name: str, env: dict[str, Any]):
        super().__init__(name)
        self._env = env

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._env.get(attr, Ref(f"{self.__name__}.{attr}"))


def _stub_env(calls: list[ChatCall]) -> dict[str, Any]:
    def record(name):
        return lambda *a, **k: Call(name, a, k)

    return {
        "EngineArgs": record("vllm.EngineArgs"),
        "SamplingParams": record("vllm.SamplingParams"),
        "LoRARequest": record("vllm.lora.request.LoRARequest"),
        "AutoTokenizer": _Auto("tokenizer", calls),
        "AutoProcessor": _Auto("processor", calls),
        "snapshot_download": lambda repo, revision=None, **_: f"snapshot://{repo}" + (f"@{revision}" if revision else ""),
        "fetch_image": lambda url: Ref(f"image:{url}"),
        "FlexibleArgumentParser": Ref("FlexibleArgumentParser"),
        "Image": Ref("PIL.Image.Image"),
    }


def _importer(calls: list[ChatCall]):
    real = builtins.__import__
    env = _stub_env(calls)

    def imp(name, globals=None, locals=None, fromlist=(), level=0):
        if name.split(".")[0] in _STUBBED:
            return _StubModule(name, env)
        if name.split(".")[0] in _MISSING:
            raise ModuleNotFoundError(name)
        return real(name, globals, locals, fromlist, level)

    return imp


def _python_source(seed: str, text: str) -> str | None:
    """The executable Python inside a seed file, or None for seeds that are not (001)."""
    fence = re.search(r"```python\n(.*?)```", text, re.S)
    if fence:
        return fence.group(1)
    if seed == "003":  # a notebook export: keep the code cells, drop markdown and run cells
        cells = re.split(r"^In \[\d+\]:\n", text, flags=re.M)[1:]
        code = []
        for cell in cells:
            cell = re.split(r"^#{2,3} ", cell, flags=re.M)[0]
            if not cell.lstrip().startswith("main("):
                code.append(cell)
        return "\n".join(code)
    # A page scrape: the code starts at its license header, docstring or first import.
    start = re.search(r'^(# SPDX|"""|import |from )', text, re.M)
    if start is None or text.count("\n") < 10:  # 001 is one line: its newlines were lost
        return None
    return text[start.start():]


@lru_cache(maxsize=None)
def load_seed(seed: str) -> dict[str, Any] | None:
    """The seed's module namespace (functions and constants), or None if it cannot run."""
    path = seed_file(seed)
    if path is None:
        return None
    source = _python_source(seed, path.read_text(encoding="utf-8"))
    if source is None:
        return None
    calls: list[ChatCall] = []
    namespace: dict[str, Any] = {
        "__name__": f"vlcheck_seed_{Path(seed).stem}",
        "__builtins__": {**vars(builtins), "__import__": _importer(calls)},
        "_chat_calls": calls,
        # 002's functions read the script's global `args` for the cache flag.
        "args": types.SimpleNamespace(disable_mm_preprocessor_cache="args.disable_mm_preprocessor_cache"),
    }
    exec(compile(source, str(path), "exec"), namespace)
    return namespace


def run_example(seed: str, function: str, *call_args) -> ExampleRun:
    """Call one example function of a seed (single: `(questions, modality)`; multi-image:
    `(question, image_urls)`) and record what it returned."""
    ns = load_seed(seed)
    if ns is None:
        raise LookupError(f"seed {seed} is missing or not executable (looked in {seeds_dir()})")
    if function not in ns:
        raise LookupError(f"seed {seed} has no function {function!r}")
    calls: list[ChatCall] = ns["_chat_calls"]
    calls.clear()
    with contextlib.redirect_stdout(io.StringIO()):  # some examples print warnings
        data = ns[function](*call_args)
    engine: Call = data.engine_args
    prompts = data.prompts if hasattr(data, "prompts") else [data.prompt]
    return ExampleRun(
        engine_args=dict(engine.kwargs),
        prompts=list(prompts),
        chat_calls=list(calls),
        stop_token_ids=list(data.stop_token_ids) if data.stop_token_ids is not None else None,
        lora_requests=list(data.lora_requests) if getattr(data, "lora_requests", None) else None,
        sampling_params=list(data.sampling_params) if getattr(data, "sampling_params", None) else None,
        chat_template=getattr(data, "chat_template", None),
    )


def example_map(seed: str) -> dict[str, str]:
    """`model_example_map` of a runnable seed: family name -> function name."""
    ns = load_seed(seed)
    if ns is None:
        return {}
    return {name: fn.__name__ for name, fn in ns["model_example_map"].items()}


def function_text(seed: str, function: str) -> str | None:
    """The raw text of one function in any seed, also the one-line HTML scrape (001)."""
    path = seed_file(seed)
    if path is None:
        return None
    text = path.read_text(encoding="utf-8")
    m = re.search(rf"def {re.escape(function)}\(.*?(?=\bdef \w+\(|\bmodel_example_map = )", text, re.S)
    return m.group(0) if m else None
