"""The exception at the bottom of a cell's evidence, where one root error fans out.

A failed import is the common case: a library that removes a name (transformers 5.17 dropping
`PixtralRotaryEmbedding`) breaks every path that imports the module needing it, and each path
wraps the ImportError in its own words: vLLM's `NotInspected`, a pydantic validation of
`ModelConfig` whose message says only "failed to be inspected" (the ImportError is in the log
above it), a server's `500`, a checkpoint recipe that "does not import", a processor that "needs a
package that is not installed". Read here, all of them are one root: the import, its owner the
pairing of the importer and the library that no longer has the name.

An import can also fail with another exception, raised while the module runs (an attribute a
binding no longer has, a version check): the wrappers say "does not import: AttributeError: ..." or
"importing its class raised AttributeError: ...". Those cells are one root too (`ImportTimeRoot`),
owned by whoever's frame raised it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IMPORT = re.compile(r"cannot import name '(?P<name>[\w.]+)' from '(?P<module>[\w.]+)'|"
                     r"No module named '(?P<missing>[\w.]+)'")
_WRAPPED = re.compile(r"validation error for \w+|failed to be inspected|Error raised in subprocess|could not inspect")
"""Evidence whose own words hide the error beneath: its details (the log) are read too."""
_LOG_ERROR = re.compile(r"^(?:ERROR\b.*|\s*(?:ImportError|ModuleNotFoundError|RuntimeError):.*)$", re.MULTILINE)
NOT_IMPORTERS = {"importlib", "pydantic", "pydantic_core", "", "<frozen importlib._bootstrap>"}


@dataclass(frozen=True)
class ImportRoot:
    name: str | None
    """The name that could not be imported (None: a whole module is missing)."""
    module: str

    @property
    def library(self) -> str:
        """Whose module it is (the top-level package)."""
        return self.module.split(".")[0]

    @property
    def key(self) -> str:
        return f"import:{self.module}:{self.name or ''}"

    @property
    def text(self) -> str:
        return (f"cannot import name '{self.name}' from '{self.module}'" if self.name
                else f"No module named '{self.module}'")

    @property
    def title(self) -> str:
        return f"a failed import: {self.text}"


_IMPORT_TIME = re.compile(r"(?:does not import(?: on this install)?|importing its class raised)[:\s]+"
                          r"(?P<kind>[A-Z]\w*(?:Error|Exception)): (?P<message>[^\n]{1,300})")
_PARENTHESIZED_PATH = re.compile(r"\s*\(/[^)]*\)?")


@dataclass(frozen=True)
class ImportTimeRoot:
    kind: str
    message: str

    @property
    def key(self) -> str:
        return f"import-time:{self.kind}:{self.message}"

    @property
    def text(self) -> str:
        return f"{self.kind}: {self.message}"

    @property
    def title(self) -> str:
        return f"importing a module raised {self.text}"


def import_time_root(evidence: str) -> ImportTimeRoot | None:
    """An exception other than ImportError raised while a module was imported, or None."""
    found = _IMPORT_TIME.search(evidence)
    if found is None or found["kind"] in ("ImportError", "ModuleNotFoundError"):
        return None
    message = _PARENTHESIZED_PATH.sub("", found["message"]).rstrip(" .…")
    return ImportTimeRoot(found["kind"], message[:200])


def root_of(evidence: str, details: list[str] = ()) -> ImportRoot | ImportTimeRoot | None:
    """The root error beneath a cell's evidence: a failed import, or an exception raised while importing."""
    return import_root(evidence, details) or import_time_root(evidence)


def import_root(evidence: str, details: list[str] = ()) -> ImportRoot | None:
    """The failed import at the bottom of the evidence, or of the log lines its details hold where
    the evidence's own words hide it (`_WRAPPED`); None when there is none."""
    texts = [evidence]
    if _WRAPPED.search(evidence):
        texts += [m.group(0) for d in details for m in _LOG_ERROR.finditer(str(d))]
    for text in texts:
        found = _IMPORT.search(text)
        if found:
            return ImportRoot(found["name"], found["module"]) if found["name"] else ImportRoot(None, found["missing"])
    return None


def importer(root: ImportRoot, frames_of_cells: list[list[dict]]) -> dict | None:
    """The innermost frame, among the cells' frames, of the code that did the import: not the
    library itself, nor the import machinery or a validator around it."""
    for frames in frames_of_cells:
        for frame in reversed(frames):
            package = frame.get("package", "")
            if package not in NOT_IMPORTERS and package != root.library:
                return frame
    return None
