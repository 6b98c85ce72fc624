"""The result store: a report cell's result kept under the hash of everything it depends on
(`gate.cell_inputs`), so that `vlcheck check` never measures the same thing twice.

Each family-config's result is kept too (`variant`), so that the pytest tier and `vlcheck check`
share what either measured: the README's test command and a `vlcheck check` after it measure each
family-config once between them.

A stored cell is reused only when every input hashes the same: vlcheck's code that the check
reaches, the family's spec (and its base's), the code of the installed vLLM / transformers / torch
and the other packages a cell depends on (by content, not version: `core.installed_code`), the Hub
files and seed scripts the family reads, the engine platform, weights and configuration. An
`error` cell (vlcheck's own crash) is never stored. One JSON file per cell; writes are atomic, so
parallel workers and CI jobs may share a store (`VLCHECK_STORE`, default ~/.cache/vlcheck/results).

A package that changes on disk while a run measures would leave cells of other code under the
key of the code the run started on: every writer walks the packages again at most every
`RECHECK_EVERY_S` and at its end (`close`); on a change it stops using the store and takes back
every entry written since the run opened it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from vlcheck.core.results import CheckResult, Status
from vlcheck.gate import cell_inputs
from vlcheck.gate.checks import code_of
from vlcheck.spec.schema import FamilySpec

STORE_ENV = "VLCHECK_STORE"
FORMAT = 2
"""2: packages keyed by the content of their code (was: their version strings)."""
RECHECK_EVERY_S = 30.0
"""How often a writing process walks the packages again (0.5 s a walk: under 2% of a run)."""


def configured(path: str | None = None, fresh: bool = False) -> "ResultStore | None":
    """`--store` (else $VLCHECK_STORE, else ~/.cache/vlcheck/results); `none`: no store."""
    where = path or os.environ.get(STORE_ENV) or str(Path.home() / ".cache" / "vlcheck" / "results")
    return None if where == "none" else ResultStore(where, fresh)


class ResultStore:
    def __init__(self, path: Path | str, fresh: bool = False):
        self.path = Path(path)
        self.fresh = fresh
        """Measure every cell again (and store what was measured)."""
        self.stored = 0
        self.reused_cells: list[tuple[str, str]] = []
        """(family, check) of every reused cell: the report names them."""
        self.reused_variants = 0
        """Family-configs taken from the store for the cells `run_checks` measured (`variants_from_before`)."""
        self.opened = time.time()
        self.code: dict[str, str] | None = None
        """The packages' code digests the keys were computed with (set by the first key)."""
        self.changed: list[str] = []
        """Packages whose code changed during the run: the store is off for the rest of it."""
        self._checked = time.monotonic()

    @property
    def reused(self) -> int:
        return len(self.reused_cells)

    def _installed(self) -> dict[str, Any]:
        found = cell_inputs.installed()
        if self.code is None:
            self.code = found["code"]
        return found

    def key(self, check, spec: FamilySpec, engine: dict[str, Any] | None = None) -> str:
        fn = check.per_family or check.run
        module, name = code_of(fn)
        code = [cell_inputs.code_digest("vlcheck.gate.checks", "run_cell")]
        if module in cell_inputs.modules():
            code.append(cell_inputs.code_digest(module, name))
        else:  # a function outside vlcheck (a test's, a plugin's): its own source
            code.append(cell_inputs.source_digest(getattr(fn, "func", fn)))
        return cell_inputs.as_key({
            "format": FORMAT, "check": check.name, "declared_as": check.declared_as,
            "code": code,
            "spec": cell_inputs.spec_part(spec), "reads": cell_inputs.read_inputs(spec),
            "installed": self._installed(), "engine": engine,
            "overrides": check.engine_overrides,
        })

    def fact_key(self, name: str, module: str, function: str, packages: tuple[str, ...] = ("vllm", "transformers", "torch")) -> str:
        """The key of a fact of installed packages alone (the adapter's generations, for the report's
        environment): `module.function`'s code (what it reaches) and the code of `packages`."""
        found = self._installed()
        return cell_inputs.as_key({"format": FORMAT, "fact": name, "code": cell_inputs.code_digest(module, function),
                                   "installed": {**{k: v for k, v in found.items() if k != "code"},
                                                 "code": {p: found["code"].get(p) for p in packages}}})

    def get_fact(self, key: str) -> Any:
        if self.fresh or self.changed:
            return None
        try:
            return json.loads(self._file(key).read_text())["fact"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put_fact(self, key: str, value: Any) -> None:
        self._write(key, {"fact": value})

    def _file(self, key: str) -> Path:
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str, counted: bool = True) -> CheckResult | None:
        """The stored cell (`counted`: a report cell, named among the reused ones), or None."""
        if self.fresh or self.changed:
            return None
        try:
            stored = json.loads(self._file(key).read_text())
        except (OSError, ValueError):
            return None
        stored["status"] = Status(stored["status"])
        result = CheckResult(**stored)
        if counted:
            self.reused_cells.append((result.family, result.check))
        return result

    @staticmethod
    def _variant_key(key: str, kind: str) -> str:
        return cell_inputs.as_key({"cell": key, "variant": kind})

    def variant(self, key: str, kind: str, measure: Callable[[], CheckResult]) -> CheckResult:
        """One family-config's result of the cell `key`: the stored one, else `measure()`, stored."""
        part = self._variant_key(key, kind)
        found = self.get(part, counted=False)
        if found is not None:
            return found
        result = measure()
        self.put(part, result, counted=False)
        return result

    def variants_from_before(self, key: str, kinds: list[str]) -> int:
        """How many of the cell `key`'s family-configs were in the store before this run opened it
        (worker processes hold copies of the store: the files, not the counters, tell)."""
        found = 0
        for kind in kinds:
            try:
                found += self._file(self._variant_key(key, kind)).stat().st_mtime < self.opened
            except OSError:
                pass
        return found

    def put(self, key: str, result: CheckResult, counted: bool = True) -> None:
        if result.status is Status.ERROR:
            return
        document = dataclasses.asdict(result)
        document["status"] = result.status.value
        self._write(key, document)
        self.stored += counted

    def _write(self, key: str, document: dict[str, Any]) -> None:
        if time.monotonic() - self._checked >= RECHECK_EVERY_S:
            self.close()
        if self.changed:
            return
        target = self._file(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp") as out:
            json.dump(document, out, default=str)
        os.replace(out.name, target)

    def close(self) -> list[str]:
        """Walk the packages again: where their code is no longer what the keys were computed with,
        every entry written since the store was opened (by any process of this run) is taken back,
        and the store is off for the rest of the run. Returns the packages that changed."""
        self._checked = time.monotonic()
        if self.code is None or self.changed:
            return self.changed
        from vlcheck.core.installed_code import changed_since

        self.changed = changed_since(self.code)
        if self.changed:
            taken = self._take_back_since(self.opened)
            print(f"vlcheck: the code of {', '.join(self.changed)} changed on disk during this run: its results are not "
                  f"stored ({taken} entries written since it began taken back from {self.path}); run it again",
                  file=sys.stderr)
        return self.changed

    def remove(self, key: str, kinds: list[str] = ()) -> None:
        """Take a cell, and its family-configs `kinds`, out of the store."""
        for part in [key, *(self._variant_key(key, kind) for kind in kinds)]:
            self._file(part).unlink(missing_ok=True)

    def _take_back_since(self, when: float) -> int:
        taken = 0
        for entry in self.path.glob("*/*.json"):
            try:
                if entry.stat().st_mtime >= when:
                    entry.unlink()
                    taken += 1
            except OSError:
                pass
        return taken
