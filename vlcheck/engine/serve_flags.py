"""Engine args as `vllm serve` flags, and the model name the served checks ask for: shared by the
separate engine server (`engine_server`) and the shared engine (`shared_server`)."""

from __future__ import annotations

from typing import Any

from vlcheck.served.launch import flag

__all__ = ["SERVED_NAME", "flags"]

NOT_FLAGS = ("model",)
SERVED_NAME = "vlcheck"
"""The model name requests use (`--served-model-name`), whatever folder is served."""


def flags(engine_args: dict[str, Any]) -> list[str]:
    """Engine args as `vllm serve` flags (`served.launch.flag`: the one spelling of an arg)."""
    return [word for key, value in engine_args.items() if key not in NOT_FLAGS and value is not None
            for word in flag(key, value)]
