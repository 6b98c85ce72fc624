"""transformers' remote-code machinery (`trust_remote_code`), for the synthetic checkpoint builder:
which modules a model's Python file imports, and its config / processor classes loaded from a
local folder of the model's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def imported_packages(module: Path) -> list[str]:
    """The top-level packages a remote module imports outside try/except (what transformers'
    check_imports requires to be installed)."""
    from transformers.dynamic_module_utils import get_imports

    return list(get_imports(str(module)))


def sibling_modules(module: Path) -> list[str]:
    """The modules of the same repo a remote module imports (`from .x import ...`), by name."""
    from transformers.dynamic_module_utils import get_relative_imports

    return list(get_relative_imports(str(module)))


def load_config(folder: Path) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(folder), trust_remote_code=True)


def load_class(ref: str, folder: Path) -> type:
    """`module.Class` from the remote module in `folder`."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    return get_class_from_dynamic_module(ref, str(folder))


def load_image_processor(folder: Path, overrides: dict[str, Any]) -> Any:
    """The image processor `folder`'s preprocessor_config.json names, with its settings."""
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(str(folder), trust_remote_code=True, **overrides)
