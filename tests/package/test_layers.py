"""The layout's two import rules, checked on the source (docs/architecture.md):

(a) a vlcheck module imports only its own layer and lower ones, in the order `vlcheck.LAYERS`
    declares (every module lies in a layer: a subpackage of vlcheck/);
(b) only vlcheck/adapter/ imports vLLM's or transformers' internals; everywhere else (the other
    layers, the tests, conftest.py, scripts/) only the public entry points in PUBLIC_API.

Lazy imports inside functions count: they are how a module reaches a layer, too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vlcheck
from vlcheck import LAYERS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vlcheck"

GUARDED = ("vllm", "transformers")
PUBLIC_API: dict[str, set[str]] = {
    # vLLM's offline inference API, as its docs and examples use it: the engine (engine/engines.py)
    # and the sampling parameters of every request (cpu/vllm_checks.py, engine/runs.py,
    # engine/run_example.py).
    "vllm": {"LLM", "SamplingParams"},
    # Top-level exports of transformers: the fast tokenizer class that wraps the tokenizer the
    # synthetic checkpoints train, and the model_type -> config class map (what AutoConfig.for_model
    # reads) for sub-configs a recipe gives as a table (checkpoints/synthetic.py).
    "transformers": {"PreTrainedTokenizerFast", "CONFIG_MAPPING"},
}
BARE_IMPORTS = {
    # `import transformers`, for `transformers.__version__` and the processor classes transformers
    # exports at top level under the names the adapter looks up (checkpoints/synthetic.py,
    # tests/numerics/test_cpu_reference.py). `import vllm` is not used outside the adapter.
    "transformers",
}


def layer_of(module: str) -> str | None:
    """`vlcheck.<layer>.<...>` -> layer; None for vlcheck itself and for non-vlcheck modules."""
    parts = module.split(".")
    return parts[1] if parts[0] == "vlcheck" and len(parts) > 1 else None


def imported_modules(module: str, source: str, is_package: bool = False) -> list[tuple[str, list[str]]]:
    """Every import in the source as (absolute module, imported names); relative ones resolved."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, [alias.name for alias in node.names]))
    return found


def violations(where: str, module: str | None, source: str, is_package: bool = False) -> list[str]:
    """What breaks the rules in one file. `where`: its path for the message; `module`: its dotted
    name if it is part of vlcheck (rule a applies), else None (tests, scripts: rule b only)."""
    problems = []
    own = layer_of(module) if module else None
    for target, names in imported_modules(module or "", source, is_package):
        # `from vlcheck import engine` and `from vlcheck.engine import engines`: name what is imported
        in_package = target.split(".")[0] == "vlcheck" and target.count(".") <= 1
        targets = [f"{target}.{n}" for n in names] if in_package and names else [target]
        for t in targets:
            layer = layer_of(t)
            if module and layer in LAYERS and own in LAYERS and LAYERS.index(layer) > LAYERS.index(own):
                problems.append(f"{where}: imports {t}: layer '{own}' may import only its own and lower layers "
                                f"({' < '.join(LAYERS[: LAYERS.index(own) + 1])}), and '{layer}' is higher")
        top = target.split(".")[0]
        if top in GUARDED and own != "adapter":
            if target == top and not names:
                ok = top in BARE_IMPORTS
            else:
                ok = target == top and all(n in PUBLIC_API[top] for n in names)
            if not ok:
                what = target + (f" ({', '.join(names)})" if names else "")
                problems.append(f"{where}: imports {what}: only vlcheck/adapter/ may import {top} internals; "
                                f"outside it use {top}'s public entry points ({', '.join(sorted(PUBLIC_API[top]))}) "
                                "or add a function to vlcheck/adapter/")
    return problems


def module_name(path: Path) -> tuple[str, bool]:
    parts = path.relative_to(ROOT).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def test_the_layers_are_the_subpackages():
    """Each layer is a package folder, and every module lies in one (vlcheck/__init__.py aside)."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(LAYERS), f"vlcheck.LAYERS {LAYERS} vs subpackages of vlcheck/ {sorted(packages)}"
    loose = [str(p.relative_to(ROOT)) for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside every layer (move each into the layer of what it imports): {loose}"
    assert Path(vlcheck.__file__).resolve() == PACKAGE / "__init__.py", "tests must import this checkout's vlcheck"


def test_no_module_imports_a_higher_layer_or_vllm_internals():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, is_package = module_name(path)
        problems += violations(str(path.relative_to(ROOT)), module, path.read_text(), is_package)
    assert not problems, "\n".join(problems)


def test_tests_and_scripts_use_only_public_vllm_and_transformers_apis():
    # files only: a test that imports a script leaves scripts/__pycache__ where bytecode is written (CI)
    scripts = [p for p in sorted((ROOT / "scripts").iterdir())
               if p.is_file() and (p.suffix == ".py" or p.read_text().startswith("#!/usr/bin/env python"))]
    files = [ROOT / "conftest.py", *sorted((ROOT / "tests").rglob("*.py")), *scripts]
    problems = []
    for path in files:
        problems += violations(str(path.relative_to(ROOT)), None, path.read_text())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module, source, expected", [
    ("vlcheck.core.results", "from vlcheck.gate.report import render\n",
     "vlcheck/core/results.py: imports vlcheck.gate.report: layer 'core' may import only its own and lower "
     "layers (core), and 'gate' is higher"),
    ("vlcheck.spec.registry", "def f():\n    from vlcheck import hostile\n",
     "imports vlcheck.hostile: layer 'spec'"),
    ("vlcheck.prompt.render", "from ..engine import engines\n", "imports vlcheck.engine.engines: layer 'prompt'"),
    ("vlcheck.prompt.render", "from vllm.multimodal.processing import BaseProcessingInfo\n",
     "imports vllm.multimodal.processing (BaseProcessingInfo): only vlcheck/adapter/ may import vllm internals"),
    ("vlcheck.engine.engines", "import vllm.distributed\n", "imports vllm.distributed: only vlcheck/adapter/"),
    ("vlcheck.engine.engines", "import vllm\n", "imports vllm: only vlcheck/adapter/"),
    ("vlcheck.checkpoints.synthetic", "from transformers import AutoConfig, LlavaConfig\n",
     "imports transformers (AutoConfig, LlavaConfig): only vlcheck/adapter/"),
])
def test_a_violation_is_reported_with_module_import_and_rule(module, source, expected):
    where = module.replace(".", "/") + ".py"
    problems = violations(where, module, source)
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize("module, source", [
    ("vlcheck.cli.main", "from vlcheck.core.results import Status\nfrom vlcheck import adapter\n"),
    ("vlcheck.engine.engines", "from vllm import LLM\nfrom .goldens import compare\n"),
    ("vlcheck.adapter.engine", "from vllm.lora.request import LoRARequest\n"),
    ("vlcheck.checkpoints.synthetic", "import transformers\nfrom transformers import PreTrainedTokenizerFast\n"),
])
def test_allowed_imports_pass(module, source):
    assert violations(module.replace(".", "/") + ".py", module, source) == []
