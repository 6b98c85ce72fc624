"""A user's `vllm serve` line, parsed by the installed vLLM's own CLI parser and resolved the way
the server resolves it, without a GPU.

The parser is vLLM's: `FlexibleArgumentParser` with the `serve` subcommand's arguments
(`vllm.entrypoints.cli.serve.ServeSubcommand.subparser_init`, vllm 0.24 and 0.32), so a flag the
installed vLLM no longer accepts fails here as it would at the user's prompt. The configuration is
`AsyncEngineArgs.from_cli_args(args)` turned into vLLM's config objects on its CPU platform
(`render_server.cpu_platform`, switched back after); the facts recorded are the ones a user's
requests depend on.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shlex
from dataclasses import dataclass
from typing import Any


class ServeLineRejected(ValueError):
    """vLLM's parser refused the line; `flag` names the flag it refused (None if it did not say)."""

    def __init__(self, message: str, flag: str | None):
        super().__init__(message)
        self.flag = flag


@dataclass
class ParsedLine:
    model: str
    args: Any
    """vLLM's argparse namespace."""


def split(line: str) -> tuple[str, list[str]]:
    """`vllm serve MODEL --flag ...` (or without `vllm serve`) -> (MODEL, flags)."""
    words = shlex.split(line)
    if words[:2] == ["vllm", "serve"]:
        words = words[2:]
    if not words or words[0].startswith("-"):
        raise ServeLineRejected(f"no model in {line!r}: write `vllm serve MODEL [flags]`", None)
    return words[0], words[1:]


def _parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    return parser


def rejected_flag(message: str) -> str | None:
    m = re.search(r"argument (--[\w.-]+)", message) or re.search(r"unrecognized arguments: (--[\w.-]+)", message)
    return m.group(1) if m else None


def parse(model: str, flags: list[str]) -> ParsedLine:
    """Parse with vLLM's parser (raises ServeLineRejected with vLLM's message)."""
    from vlcheck.adapter.render_server import cpu_platform

    err = io.StringIO()
    try:
        # the parser's defaults build a DeviceConfig, which must find a platform
        with cpu_platform(), contextlib.redirect_stderr(err):
            args = _parser().parse_args(["serve", model, *flags])
    except SystemExit:
        text = err.getvalue().strip().splitlines()
        message = next((line for line in reversed(text) if "error:" in line), text[-1] if text else "rejected")
        message = re.sub(r" at 0x[0-9a-fA-F]+", "", message.split("error:", 1)[-1].strip())
        raise ServeLineRejected(message, rejected_flag(message)) from None
    except (ValueError, TypeError) as exc:  # FlexibleArgumentParser's own checks raise directly
        raise ServeLineRejected(f"{type(exc).__name__}: {exc}", rejected_flag(str(exc))) from None
    args.model = model
    return ParsedLine(model, args)


def resolved_facts(parsed: ParsedLine, model_dir: str) -> dict[str, Any]:
    """The configuration the server would run with, for the line's flags on `model_dir`."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    from vlcheck.adapter.render_server import cpu_platform

    with cpu_platform():
        return _resolved_facts(parsed, model_dir, AsyncEngineArgs)


def _resolved_facts(parsed: ParsedLine, model_dir: str, AsyncEngineArgs) -> dict[str, Any]:
    from vlcheck.adapter.models import inspect_in_this_process

    inspect_in_this_process()
    args = parsed.args
    args.model = model_dir
    engine_args = AsyncEngineArgs.from_cli_args(args)
    model_config = engine_args.create_model_config()
    mm = model_config.multimodal_config
    facts: dict[str, Any] = {
        "max_model_len": model_config.max_model_len,
        "limit_mm_per_prompt": _plain(getattr(mm, "limit_per_prompt", None)),
        "mm_processor_kwargs": _plain(getattr(mm, "mm_processor_kwargs", None)),
        "mm_processor_cache_gb": getattr(mm, "mm_processor_cache_gb", None),
        "mm_processor_cache_type": _plain(getattr(mm, "mm_processor_cache_type", None)),
        "chat_template": "--chat-template" if getattr(args, "chat_template", None) else "the model's (or vLLM's fallback)",
        "chat_template_content_format": getattr(args, "chat_template_content_format", None),
    }
    for key in ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill", "enable_prefix_caching",
                "async_scheduling"):
        facts[f"scheduler.{key}"] = _plain(getattr(engine_args, key, None))
    facts.update(_scheduler_defaults(engine_args))
    return {k: v for k, v in facts.items() if v is not None}


def _scheduler_defaults(engine_args) -> dict[str, Any]:
    """The scheduler's resolved defaults where vLLM resolves them without a device; none where it cannot."""
    try:
        from vllm.usage.usage_lib import UsageContext

        config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except Exception as err:  # noqa: BLE001  (device-dependent resolution: those facts stay unmeasured, and say why)
        return {"scheduler.unresolved": f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"}
    sched = config.scheduler_config
    return {f"scheduler.resolved.{k}": _plain(getattr(sched, k, None))
            for k in ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill", "max_model_len")}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value"):  # enums
        return _plain(value.value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    return str(value)


NOT_CARRIED = ("model", "tokenizer", "served_model_name", "revision", "tokenizer_revision", "download_dir")
"""Flags that name the user's model files: the synthetic checkpoint stands in for them."""


def non_default_engine_args(flags: str) -> dict[str, Any]:
    """A launch line's flags as engine args: the EngineArgs fields vLLM's parser sets otherwise
    than with no flags (raises ServeLineRejected where vLLM's parser refuses them)."""
    from vlcheck.adapter.engine import engine_arg_types

    words = shlex.split(flags)
    given, default = vars(parse("model", words).args), vars(parse("model", []).args)
    fields = engine_arg_types()
    return {k: v for k, v in given.items()
            if k in fields and k not in NOT_CARRIED and v != default.get(k)}


def parse_on_this_platform(model: str, flags: list[str]):
    """vLLM's `serve` namespace for MODEL and flags on the platform this process runs (a GPU's, or
    the CPU build's): the shared engine's command line (`vlcheck/engine/shared_server.py`)."""
    args = _parser().parse_args(["serve", model, *flags])
    args.model = model
    return args


@functools.cache
def engine_arg_default(key: str) -> Any:
    """The installed vLLM's EngineArgs default of `key` (None where vLLM or the field is missing)."""
    import dataclasses

    try:
        from vllm.engine.arg_utils import EngineArgs
    except ImportError:
        return None
    found = {f.name: f for f in dataclasses.fields(EngineArgs)}.get(key)
    return None if found is None or found.default is dataclasses.MISSING else found.default
