"""A family's small Hub files, fetched through huggingface_hub with the usual HF conventions, or
read from the model's own folder where the spec names one (a user's fine-tune on local disk).

`HF_HOME` / `HF_HUB_CACHE` pick the cache, `HF_HUB_OFFLINE=1` keeps everything local, `HF_TOKEN`
opens gated repos; revisions come from the spec. Every fetch ends in one of four states, because
the checks treat them differently: found; missing offline (skip, naming the file); gated (skip:
set HF_TOKEN); does not exist upstream (a failure: the spec points nowhere).
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from vlcheck.spec.models import is_path, local_dir

class Status(enum.Enum):
    FOUND = "found"
    MISSING_OFFLINE = "missing offline"
    GATED = "gated"
    NOT_FOUND = "does not exist upstream"
    UNREACHABLE = "hub unreachable"


@dataclass(frozen=True)
class Asset:
    repo: str
    filename: str
    revision: str | None
    status: Status
    path: Path | None = None
    detail: str = ""

    @property
    def found(self) -> bool:
        return self.status is Status.FOUND

    def text(self) -> str:
        assert self.path is not None, self.why()
        return self.path.read_text(encoding="utf-8")

    def json(self) -> Any:
        return json.loads(self.text())

    def why(self) -> str:
        """One line for a skip or failure message."""
        at = f"{self.repo}/{self.filename}" + (f"@{self.revision}" if self.revision else "")
        if is_path(self.repo) and self.status is Status.NOT_FOUND:
            return f"{at} does not exist ({self.detail})"
        return {
            Status.FOUND: f"{at} found",
            Status.MISSING_OFFLINE: f"{at} is not in the HF cache and HF_HUB_OFFLINE is set",
            Status.GATED: f"{at} is gated: set HF_TOKEN to a token with access",
            Status.NOT_FOUND: f"{at} does not exist upstream ({self.detail})",
            Status.UNREACHABLE: f"{at}: the Hub could not be reached ({self.detail})",
        }[self.status]


def hub_cache() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


@lru_cache(maxsize=None)
def fetch(repo: str, filename: str, revision: str | None = None) -> Asset:
    """One file of a model repo, from the cache or the Hub; of a model folder, from the folder."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub import errors as e

    if is_path(repo):
        folder = local_dir(repo)
        if folder is None:
            return Asset(repo, filename, revision, Status.NOT_FOUND, detail="no such repo: the model folder does not exist")
        path = folder / filename
        if path.is_file():
            return Asset(repo, filename, revision, Status.FOUND, path)
        return Asset(repo, filename, revision, Status.NOT_FOUND, detail="no such file in the model folder")
    try:
        path = hf_hub_download(repo, filename, revision=revision)
        return Asset(repo, filename, revision, Status.FOUND, Path(path))
    except e.GatedRepoError as err:
        return Asset(repo, filename, revision, Status.GATED, detail=_first_line(err))
    except e.LocalEntryNotFoundError as err:  # a subclass of EntryNotFoundError: test it first
        if _known_missing(repo, filename, revision):
            return Asset(repo, filename, revision, Status.NOT_FOUND, detail="the cache records it as absent")
        status = Status.MISSING_OFFLINE if offline() else Status.UNREACHABLE
        return Asset(repo, filename, revision, status, detail=_first_line(err))
    except e.RevisionNotFoundError as err:
        return Asset(repo, filename, revision, Status.NOT_FOUND, detail=f"no revision {revision!r}: {_first_line(err)}")
    except e.RepositoryNotFoundError as err:
        # Without a token the Hub answers 401 for private *and* nonexistent repos alike.
        hint = "" if os.environ.get("HF_TOKEN") else " (or private: set HF_TOKEN)"
        return Asset(repo, filename, revision, Status.NOT_FOUND, detail=f"no such repo{hint}: {_first_line(err)}")
    except e.EntryNotFoundError as err:
        return Asset(repo, filename, revision, Status.NOT_FOUND, detail=f"no such file: {_first_line(err)}")
    except e.HFValidationError as err:  # neither a Hub id nor a folder written as a path ("/...", "./...")
        return Asset(repo, filename, revision, Status.NOT_FOUND, detail=f"no such repo: not a Hub id: {_first_line(err)}")
    except (e.HfHubHTTPError, OSError) as err:
        return Asset(repo, filename, revision, Status.UNREACHABLE, detail=_first_line(err))


def _known_missing(repo: str, filename: str, revision: str | None) -> bool:
    """The cache's `.no_exist/<commit>/<file>` marker: the Hub said the file is absent."""
    folder = Path(hub_cache()) / ("models--" + repo.replace("/", "--"))
    ref = folder / "refs" / (revision or "main")
    commit = ref.read_text().strip() if ref.is_file() else (revision or "")
    return bool(commit) and (folder / ".no_exist" / commit / filename).exists()


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


@dataclass(frozen=True)
class ModelAssets:
    """The small files of one model repo at one revision, fetched on first use."""

    repo: str
    revision: str | None = None

    def get(self, filename: str) -> Asset:
        return fetch(self.repo, filename, self.revision)

    def json_or_none(self, filename: str) -> dict[str, Any] | None:
        asset = self.get(filename)
        return asset.json() if asset.found else None

    def special_tokens(self) -> dict[str, str]:
        """bos/eos/pad/unk token strings from tokenizer_config.json or special_tokens_map.json."""
        out: dict[str, str] = {}
        for filename in ("special_tokens_map.json", "tokenizer_config.json"):  # later wins
            data = self.json_or_none(filename) or {}
            for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
                value = data.get(key)
                if isinstance(value, dict):
                    value = value.get("content")
                if isinstance(value, str):
                    out[key] = value
        return out

    def token_ids(self) -> dict[str, int]:
        """Token string -> id for the added/special tokens the config files list (no vocabulary
        needed: stop and placeholder tokens are special tokens)."""
        ids: dict[str, int] = {}
        config = self.json_or_none("tokenizer_config.json") or {}
        for token_id, entry in (config.get("added_tokens_decoder") or {}).items():
            ids[entry["content"]] = int(token_id)
        ids.update({k: int(v) for k, v in (self.json_or_none("added_tokens.json") or {}).items()})
        tokenizer = self.get("tokenizer.json")
        if tokenizer.found:
            for entry in tokenizer.json().get("added_tokens", []):
                ids[entry["content"]] = int(entry["id"])
        return ids
