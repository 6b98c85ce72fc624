"""Which generation of each internal API the adapter picked for the installed vLLM and transformers.

A shim module detects the generation once (by signature, attribute or import, never by comparing
version strings), records it here under the API's name, and `vlcheck.adapter.describe()` shows the
record in the report's environment: a reader of a report made on a new release sees which shims
ran, and a shim that found no generation it knows is named there, not hidden in a traceback.
"""

from __future__ import annotations

import importlib
from typing import Callable

from vlcheck.core.results import SuiteError

_picked: dict[str, str] = {}


def record(api: str, generation: str) -> str:
    _picked[api] = generation
    return generation


def picked() -> dict[str, str]:
    return dict(_picked)


def unknown(api: str, what_was_looked_for: str) -> SuiteError:
    """The error a shim raises when the installed packages have none of the generations it knows."""
    record(api, f"none known ({what_was_looked_for})")
    return SuiteError(f"vlcheck's adapter knows no generation of {api} for this install: {what_was_looked_for}")


def single_generation(api: str, module: str, name: str, versions: str) -> str:
    """An API with one known generation, `module.name`: recorded when it imports (`versions`: where
    it was measured), the unknown-generation error otherwise."""
    try:
        getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise unknown(api, f"{module}.{name}") from None
    return record(api, f"{module}.{name} ({versions})")


def detect_all(detectors: dict[str, Callable[[], str]]) -> dict[str, str]:
    """Run every detector (each records its pick); a detector that raises is reported, not raised.
    Only the detectors' APIs: what else the process happened to use would make the answer depend on
    where it ran (a worker, or a process that ran checks first)."""
    found = {}
    for api, detect in detectors.items():
        try:
            found[api] = detect()
        except Exception as err:  # noqa: BLE001 - the report must still be written
            found[api] = record(api, f"detection failed: {type(err).__name__}: {str(err)[:200]}")
    return found
