"""The package's shape, checked on the source (docs/architecture.md, issue 37):

(a) no import circle between vlcheck's modules: a module never reaches itself through the modules
    it imports (lazy imports inside functions count, as in test_layers.py);
(b) no folder (layer) of vlcheck/ holds more than a quarter of the package's lines: a folder that
    grows past that is split into folders that name their concepts.
"""

from __future__ import annotations

from pathlib import Path

from test_layers import PACKAGE, imported_modules, module_name  # tests/package/ is on sys.path (rootdir conftest, prepend)

MAX_SHARE = 0.25


def modules() -> dict[str, Path]:
    return {module_name(path)[0]: path for path in sorted(PACKAGE.rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """module -> the vlcheck modules it imports (`from vlcheck.x import y`: y if it is a module, else
    vlcheck.x). A package's own `__init__` is not an edge of its submodules' imports."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        edges = set()
        for target, names in imported_modules(module, path.read_text(), is_package):
            if target.split(".")[0] != "vlcheck":
                continue
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
            edges.update(submodules or ([target] if target in known else []))
        edges.discard(module)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def folder_lines() -> dict[str, int]:
    """Lines of Python per folder of vlcheck/ (its top-level subpackages; `vlcheck/__init__.py` as '.')."""
    lines: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        folder = parts[0] if len(parts) > 1 else "."
        lines[folder] = lines.get(folder, 0) + len(path.read_text().splitlines())
    return lines


def folder_table(lines: dict[str, int]) -> str:
    total = sum(lines.values())
    rows = [f"{'folder':<16}{'lines':>7}{'share':>8}"]
    rows += [f"{folder + '/':<16}{n:>7}{n / total:>8.1%}" for folder, n in sorted(lines.items(), key=lambda kv: -kv[1])]
    return "\n".join(rows + [f"{'total':<16}{total:>7}"])


def test_no_import_circle_between_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_folder_holds_more_than_a_quarter_of_the_lines():
    lines = folder_lines()
    total = sum(lines.values())
    over = [folder for folder, n in lines.items() if n > MAX_SHARE * total]
    assert not over, (f"folders over {MAX_SHARE:.0%} of vlcheck's lines: {', '.join(over)}; split each into "
                      f"folders that name their concepts\n{folder_table(lines)}")


def test_a_circle_is_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert graph, "no modules found"
    assert all(target in graph for edges in graph.values() for target in edges)
