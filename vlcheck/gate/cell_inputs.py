"""Everything a report cell's result depends on, as JSON-able parts (`gate.store` hashes them):
vlcheck's own code that the check reaches, the family's spec, the installed packages, the Hub
files and seed scripts it reads, and the engine it runs on.

A part that cannot be pinned down makes the cell unstorable (`None`): it is measured every time.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from vlcheck.spec.schema import FamilySpec

PACKAGE = Path(__file__).resolve().parents[1]
ENVIRONMENT_VARIABLES = ("HF_HUB_OFFLINE", "VLCHECK_SEEDS_DIR", "VLCHECK_SPEC_PATH")
"""Variables that change what a check measures (a token's value is never stored: only whether one is set)."""


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def _sources() -> dict[str, Path]:
    return {_module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _targets(module: str, is_package: bool, nodes) -> set[str]:
    """The vlcheck modules the import statements among `nodes` name."""
    known, package = _sources(), module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [(base, tuple(a.name for a in node.names))]
        else:
            continue
        for target, names in targets:
            subs = {f"{target}.{n}" for n in names if f"{target}.{n}" in known}
            found |= subs or ({target} if target in known else set())
            while "." in target:  # `import vlcheck.a.b` also runs the packages above it
                target = target.rpartition(".")[0]
                if target in known:
                    found.add(target)
    return found


def modules() -> set[str]:
    return set(_sources())


def source_digest(fn) -> str:
    import inspect

    try:
        return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()
    except (OSError, TypeError):
        return f"{fn.__module__}.{getattr(fn, '__qualname__', fn)}"


@lru_cache(maxsize=None)
def _tree(module: str) -> ast.Module:
    path = _sources()[module]
    return ast.parse(path.read_text(), str(path))


def _imports(module: str) -> set[str]:
    """The vlcheck modules `module` imports anywhere in its source (lazy imports count)."""
    return _targets(module, _sources()[module].name == "__init__.py", ast.walk(_tree(module)))


def _function_imports(module: str, function: str) -> set[str]:
    """The modules one function of `module` reaches: the module's top-level imports, and the
    imports inside the function and inside the same module's functions it names (transitively).
    A catalogue module lazily imports every layer; one check reaches only its own."""
    tree = _tree(module)
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    bodies, todo = {}, [function]
    while todo:
        name = todo.pop()
        if name in bodies or name not in defined:
            continue
        bodies[name] = defined[name]
        todo += [n.id for n in ast.walk(defined[name]) if isinstance(n, ast.Name)]
    nodes = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    nodes += [n for body in bodies.values() for n in ast.walk(body)]
    if function not in defined:  # not a top-level def (a lambda, a method): the whole module
        nodes = list(ast.walk(tree))
    return _targets(module, _sources()[module].name == "__init__.py", nodes)


@lru_cache(maxsize=None)
def code_digest(module: str, function: str | None = None) -> str:
    """sha256 of the source of `module` and of every vlcheck module it reaches by importing (with
    `function`: what that function of `module` reaches, `_function_imports`)."""
    known = _sources()
    seen: set[str] = {module}
    todo = list(_function_imports(module, function) if function else _imports(module))
    while todo:
        name = todo.pop()
        if name in seen or name not in known:
            continue
        seen.add(name)
        todo += _imports(name)
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + known[name].read_bytes() + b"\0")
    return digest.hexdigest()


def spec_part(spec: FamilySpec) -> Any:
    """The loaded spec (with its base family's, whose recipe and placeholders it reuses)."""
    part = {"spec": dataclasses.asdict(spec)}
    if spec.base:
        from vlcheck.spec.registry import get_family

        try:
            part["base"] = dataclasses.asdict(get_family(spec.base))
        except Exception as err:  # noqa: BLE001 - a base that does not load is itself the input
            part["base"] = f"unloadable: {type(err).__name__}: {err}"
    part["spec"].pop("path", None)  # where the file lies is not what it says
    return part


def model_files(model: str) -> list[str]:
    """What vlcheck may read of `model`: a folder's files (size, mtime), or the Hub cache's
    snapshots of the repo (each file's blob name, which is its content hash) and its refs."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        return sorted(f"{p.relative_to(folder)} {p.stat().st_size} {p.stat().st_mtime_ns}"
                      for p in folder.rglob("*") if p.is_file())
    from vlcheck.prompt.assets import hub_cache

    repo = Path(hub_cache()) / f"models--{model.replace('/', '--')}"
    if not repo.is_dir():
        return ["not in the Hub cache"]
    out = [f"ref {p.name} {p.read_text().strip()}" for p in sorted((repo / "refs").glob("*")) if p.is_file()]
    for p in sorted((repo / "snapshots").rglob("*")):
        if p.is_symlink():
            out.append(f"{p.relative_to(repo)} -> {os.path.basename(os.readlink(p))}")
        elif p.is_file():
            out.append(f"{p.relative_to(repo)} {p.stat().st_size} {p.stat().st_mtime_ns}")
    return out


def read_inputs(spec: FamilySpec) -> dict[str, Any]:
    """The Hub repos and seed scripts the family's checks read."""
    from vlcheck.examples import seeds

    models = set()
    for variant in spec.variants:
        models.add(variant.model)
        for key in ("tokenizer",):
            if isinstance(variant.engine_args.get(key), str):
                models.add(variant.engine_args[key])
    inputs: dict[str, Any] = {m: model_files(m) for m in sorted(models)}
    for variant in spec.variants:
        if variant.source is not None:
            seed = seeds.seed_file(variant.source.seed)
            inputs[f"seed {variant.source.seed}"] = hashlib.sha256(seed.read_bytes()).hexdigest() if seed else "absent"
    return inputs


@lru_cache(maxsize=1)
def installed() -> dict[str, Any]:
    """The installed packages a cell depends on: their code by content (`core.installed_code`:
    a patched, editable or shadowed package is other code under the same version), and the versions."""
    from vlcheck.core import installed_code, versions

    from vlcheck.core.devices import cpu_kernels

    # torch's (and vLLM's CPU build's) kernels differ per instruction-set class: a store shared by
    # machines serves each only what its own class measured
    out: dict[str, Any] = {"python": sys.version.split()[0], **versions.installed(), "vllm_build": versions.vllm_build(),
                           "cpu_kernels": cpu_kernels(), "code": installed_code.digests()}
    out["environment"] = {v: os.environ.get(v) for v in ENVIRONMENT_VARIABLES}
    out["environment"]["HF_TOKEN set"] = bool(os.environ.get("HF_TOKEN"))
    return out


def as_key(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
