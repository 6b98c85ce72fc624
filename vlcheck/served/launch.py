"""A family-config's engine args written as the `vllm serve` flags a user would type.

`max_model_len = 4096` becomes `--max-model-len 4096`, a table `--mm-processor-kwargs '{...}'`,
`true` a bare flag, `false` its `--no-` form. The server gets the model's own chat template with
`--chat-template` where the example renders with it and the checkpoint has none (the synthetic
tokenizer carries no template; a user's model folder does). Args that are not fields of the
installed vLLM's EngineArgs are left out and named: the `engine_args` check reports them with
their migration; here they would only stop the server before it renders anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlcheck.adapter.serve_args import engine_arg_default
from vlcheck.spec.schema import LIMIT_AUDIO_COUNT, LIMIT_IMAGE_COUNT, LIMIT_ONE_PER_MODALITY, Variant

# Args the checkpoint or the server decides: the model folder replaces the Hub id and its tokenizer.
NOT_FLAGS = {"model", "tokenizer"}


@dataclass
class LaunchLine:
    model_dir: str
    served_name: str
    flags: list[str]
    left_out: dict[str, str] = field(default_factory=dict)
    """Engine arg -> why it is not on the line."""

    template_source: str = "the checkpoint's own"

    def text(self) -> str:
        """The line as a user would type it (shell-quoted)."""
        import shlex

        return "vllm serve " + " ".join(shlex.quote(a) for a in [self.served_name, *self.flags])

    def limits(self) -> dict[str, int] | None:
        """The line's `--limit-mm-per-prompt` (counts only), or None where it sets none."""
        if "--limit-mm-per-prompt" not in self.flags:
            return None
        value = json.loads(self.flags[self.flags.index("--limit-mm-per-prompt") + 1])
        return {m: (v["count"] if isinstance(v, dict) else v) for m, v in value.items()}

    def portable_text(self) -> str:
        """`text()` without this machine's paths (the template file is named by its source)."""
        flags = [("<chat template>" if before == "--chat-template" else flag)
                 for before, flag in zip(["", *self.flags], self.flags)]
        import shlex

        return "vllm serve " + " ".join(shlex.quote(a) for a in [self.served_name, *flags])


def flag(key: str, value: Any) -> list[str]:
    """One engine arg as `vllm serve` spells it: `True` a bare flag, lists `nargs="+"` (one word
    each), tables and lists of tables as JSON. A `False` is the arg's `--no-` form (vLLM's
    BooleanOptionalAction: `enable_prefix_caching` and others default to on), or nothing where
    False is the installed vLLM's default (`disable_log_stats` is a store_true without a `--no-`)."""
    name = "--" + key.replace("_", "-")
    if value is True:
        return [name]
    if value is False:
        return [] if engine_arg_default(key) is False else ["--no-" + key.replace("_", "-")]
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        return [name, *map(str, value)]
    if isinstance(value, (dict, list, tuple)):
        return [name, json.dumps(value)]
    return [name, str(value)]


def serve_limit(variant: Variant) -> dict[str, int] | None:
    """`limit_mm_per_prompt` for one server taking every request of the variant."""
    if variant.limit_mm_per_prompt == LIMIT_ONE_PER_MODALITY:
        return {m: 1 for m in variant.modalities}
    if variant.limit_mm_per_prompt == LIMIT_IMAGE_COUNT:
        return {"image": variant.max_images or 1}
    if variant.limit_mm_per_prompt == LIMIT_AUDIO_COUNT:
        return {"audio": variant.max_audios or 1}
    return variant.limit_mm_per_prompt  # type: ignore[return-value]


def launch_line(variant: Variant, model_dir: str, engine_fields: set[str], chat_template: Path | None,
                template_source: str) -> LaunchLine:
    args: dict[str, Any] = {}
    for modality in variant.modalities:  # modality overrides (HyperCLOVAX's video max_model_len): the largest
        for key, value in {**variant.engine_args, **variant.modalities[modality].engine_args}.items():
            args[key] = max(args[key], value) if key == "max_model_len" and key in args else value
    limit = serve_limit(variant)
    if limit is not None:
        args["limit_mm_per_prompt"] = limit
    line = LaunchLine(model_dir, variant.model, [], template_source=template_source)
    for key, value in args.items():
        if key in NOT_FLAGS:
            line.left_out[key] = "the synthetic checkpoint stands for the model"
        elif key not in engine_fields:
            line.left_out[key] = "not an engine arg of the installed vLLM (the engine_args check reports it)"
        else:
            line.flags += flag(key, value)
    line.flags += ["--served-model-name", variant.model]
    if chat_template is not None:
        line.flags += ["--chat-template", str(chat_template)]
    return line
