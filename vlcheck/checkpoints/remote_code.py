"""A model's own remote code (`trust_remote_code`), found in the HF cache for a synthetic checkpoint.

Some families' config, processor or image processor exist only as Python files in the model's
Hub repo, named by `auto_map` entries of its config.json, preprocessor_config.json and
processor_config.json. `resolve` finds those files (and the sibling modules they import) through
huggingface_hub, with the usual HF conventions (`HF_HUB_CACHE`, `HF_HUB_OFFLINE`, `HF_TOKEN`), so the
builder can load the real config and processor classes, shrink them, and ship the files inside
the checkpoint, as the real checkpoint does. Nothing is copied into the repository.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from vlcheck.adapter import remote_code as remote
from vlcheck.prompt.assets import ModelAssets

CONFIG_FILE = "config.json"
# The files whose `auto_map` can name processor classes, and the auto classes a checkpoint ships.
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json")
SHIPPED_AUTO_CLASSES = ("AutoConfig", "AutoProcessor", "AutoImageProcessor", "AutoVideoProcessor",
                        "AutoFeatureExtractor")


@dataclass(frozen=True)
class RemoteCode:
    """The model's remote-code files, resolved in the HF cache."""

    repo: str
    revision: str | None
    auto_map: dict[str, dict[str, str]]
    """Per JSON file that has one (config.json, preprocessor_config.json, ...): its auto_map,
    restricted to the classes a synthetic checkpoint ships (no modeling code, no tokenizer)."""
    files: dict[str, Path] = field(default_factory=dict)
    """Every file read: the JSON files above and the Python modules, with the modules they import."""
    missing: tuple[str, ...] = ()
    """Why each file that is needed and not available is not (`Asset.why()`: names the file)."""

    def class_ref(self, auto_class: str) -> str | None:
        """`module.Class` for an auto class (`AutoProcessor`), from whichever file names it."""
        for mapping in self.auto_map.values():
            if auto_class in mapping:
                return mapping[auto_class]
        return None

    def modules(self) -> list[str]:
        return sorted(name for name in self.files if name.endswith(".py"))

    def digest(self) -> str:
        """sha256 over every file's name and content: a changed remote file rebuilds the checkpoint."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + self.files[name].read_bytes() + b"\0")
        return h.hexdigest()

    @property
    def folder(self) -> Path:
        """The cached snapshot folder holding the files."""
        return self.files[CONFIG_FILE].parent

    def load_config(self):
        """The real config, through the model's configuration module (trust_remote_code)."""
        return remote.load_config(self.folder)

    def load_class(self, auto_class: str) -> type | None:
        """The class an auto class maps to in the model's remote code, if any."""
        ref = self.class_ref(auto_class)
        return remote.load_class(ref, self.folder) if ref else None

    def load_image_processor(self, overrides: dict):
        """The real image processor with the model's settings (`overrides` on top), if remote."""
        if self.class_ref("AutoImageProcessor") is None:
            return None
        return remote.load_image_processor(self.folder, overrides)

    def ship(self, out: Path) -> None:
        """Copy the modules into a checkpoint folder and point its JSON files' auto maps at them,
        as the real checkpoint does (modeling code and remote tokenizers are not shipped)."""
        for name in self.modules():
            shutil.copyfile(self.files[name], out / name)
        for filename, mapping in self.auto_map.items():
            target = out / filename
            data = json.loads(target.read_text()) if target.exists() else json.loads(self.files[filename].read_text())
            data["auto_map"] = mapping
            target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    def problems(self) -> list[str]:
        """Every reason the remote code cannot load here: missing files, then packages that a
        module imports and that are not installed."""
        return [*self.missing, *(f"{self.repo}/{name} imports {', '.join(packages)}, not installed"
                                 for name, packages in self.missing_packages().items())]

    def missing_packages(self) -> dict[str, list[str]]:
        """Per module: the top-level packages it imports that are not installed (what transformers'
        `check_imports` would refuse, found before loading anything)."""
        out = {}
        for name in self.modules():
            absent = [p for p in remote.imported_packages(self.files[name]) if importlib.util.find_spec(p) is None]
            if absent:
                out[name] = absent
        return out


def resolve(repo: str, revision: str | None = None) -> RemoteCode:
    """The model's config.json and the remote code its auto maps name, as far as they are
    available: `RemoteCode.problems()` names every file that is not, and every package a
    module imports that is not installed."""
    assets = ModelAssets(repo, revision)
    files: dict[str, Path] = {}
    missing: list[str] = []

    def look(filename: str) -> Path | None:
        asset = assets.get(filename)
        if not asset.found:
            missing.append(asset.why())
            return None
        files[filename] = asset.path
        return asset.path

    config_path = look(CONFIG_FILE)
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path else {}
    auto_map = {CONFIG_FILE: _shipped(config.get("auto_map"))}
    for filename in PROCESSOR_FILES:
        # Optional: a repo may have no processor of its own (InternVL's: vLLM builds one), and
        # offline, a file that is not cached cannot be told from one the repo does not have.
        asset = assets.get(filename)
        if asset.found:
            files[filename] = asset.path
            auto_map[filename] = _shipped(asset.json().get("auto_map"))
    auto_map = {k: v for k, v in auto_map.items() if v}
    if config_path and not auto_map:
        missing.append(f"{repo}: no auto_map in {CONFIG_FILE} or {', '.join(PROCESSOR_FILES)} names remote code")
    refs = [ref for mapping in auto_map.values() for ref in mapping.values()]
    missing += [f"{repo}: its auto_map takes {ref} from another repo" for ref in refs if "--" in ref]
    pending = [ref.split(".")[0] for ref in refs if "--" not in ref]
    seen: set[str] = set()
    while pending:  # each module, then the sibling modules it imports (`from .x import`)
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        if (path := look(f"{module}.py")) is not None:
            pending += remote.sibling_modules(path)
    return RemoteCode(repo, revision, auto_map, files, tuple(missing))


def _shipped(auto_map: object) -> dict[str, str]:
    """The auto classes a synthetic checkpoint ships, as `module.Class`."""
    if not isinstance(auto_map, dict):
        return {}
    out = {}
    for auto_class, ref in auto_map.items():
        if isinstance(ref, (list, tuple)):  # AutoTokenizer's [slow, fast]: not shipped anyway
            continue
        if auto_class in SHIPPED_AUTO_CLASSES and isinstance(ref, str):
            out[auto_class] = ref
    return out
