"""Engine args as `vllm serve` flags, and the model name the served checks ask for: shared by the
separate engine server (`engine_server`) and the shared engine (`shared_server`)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SERVED_NAME", "flags"]

NOT_FLAGS = ("model",)
SERVED_NAME = "vlcheck"
"""The model name requests use (`--served-model-name`), whatever folder is served."""


def flags(engine_args: dict[str, Any]) -> list[str]:
    """Engine args as `vllm serve` flags: `--max-model-len 4096`, a table or list as JSON, `True`
    as a bare flag (a `False` is every such arg's default and is left out)."""
    out: list[str] = []
    for key, value in engine_args.items():
        if key in NOT_FLAGS or value is False or value is None:
            continue
        name = "--" + key.replace("_", "-")
        out += [name] if value is True else [name, json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    return out
