"""The outcome of one check on one family: what the report matrix and the tests share."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    PASS = "pass"
    DEVIATION = "declared deviation"
    FAIL = "fail"
    """vLLM or transformers behaved differently from what the spec and the snapshots expect."""
    ERROR = "error"
    """vlcheck itself could not run the check (its adapter, builder or a fixture crashed): says
    nothing about vLLM, and is never counted as a regression."""
    SKIP = "skip"


class SuiteError(RuntimeError):
    """vlcheck's own code cannot do its job here (e.g. the adapter finds no API generation it knows
    for the installed vLLM). Checks report it as `error`, never as `fail`."""


@dataclass
class CheckResult:
    family: str
    check: str
    status: Status
    reason: str = ""
    """For fail, error and skip: why, in one line. For a declared deviation: the spec's reason."""

    details: list[str] = field(default_factory=list)
    """Longer evidence: diffs, per-item findings."""

    data: dict[str, Any] = field(default_factory=dict)
    """Machine-readable facts for reports and diffs (template sha256, token counts, ...). Only facts
    that were measured: a fact that could not be measured is absent, never empty."""

    finding: str = ""
    """For a fail or a declared deviation: what was measured, before any declaration was applied
    (the reason of the plain failure). `vlcheck diff` compares behaviour by it, not by the label."""

    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    """A report cell's family-configs (`single`, `multi_image`): each one's status, reason and
    finding, so that a diff and `pytest --vlcheck-baseline` compare family-config by family-config."""


def crashed(family: str, check: str, err: BaseException, where: str = "") -> CheckResult:
    """An exception that escaped vlcheck's own code while running a check: an `error` cell."""
    prefix = f"{where} " if where else ""
    return CheckResult(family, check, Status.ERROR,
                       f"{prefix}vlcheck crashed (not a vLLM finding): {type(err).__name__}: {str(err)[:300]}")


LIBRARIES = ("vllm", "transformers", "tokenizers")
"""The packages whose exceptions are findings. An exception raised in their code (or in what they
call: torch, PIL) is their rejection or their bug; one raised in vlcheck's code is a crash of vlcheck."""

_CHECKOUT = __file__.rsplit("/", 3)[0] + "/"  # the folder holding vlcheck/ (and, in a checkout, tests/)


def _owner(frame) -> str | None:
    module = frame.f_globals.get("__name__", "") or ""
    top = module.split(".")[0]
    if top == "vlcheck":
        return "vlcheck"
    if top in LIBRARIES:
        return top
    path = frame.f_code.co_filename
    if path.startswith(_CHECKOUT + "tests/") or path == _CHECKOUT + "conftest.py":
        return "vlcheck"  # the repository's tests and conftest: vlcheck's own code too
    return None


VALIDATION = ("pydantic", "pydantic_core")
"""vLLM's configs (EngineArgs, ModelConfig) are pydantic dataclasses: the validators are vLLM's, but
pydantic raises the ValidationError from its own frames, called straight from vlcheck's."""


def _top(frame) -> str:
    return (frame.f_globals.get("__name__", "") or "").split(".")[0]


def raised_by(err: BaseException) -> str:
    """Whose code raised `err`: the library (`vllm`, `transformers`, `tokenizers`) owning the
    innermost of their frames below vlcheck's last frame (a library's own dependencies, torch or
    PIL, count as the library that called them; pydantic called from vlcheck validates a vLLM
    config: `vllm`), else `vlcheck`. A `SuiteError` is vlcheck's. This one rule decides `error`
    against `fail` everywhere."""
    if isinstance(err, SuiteError):
        return "vlcheck"
    frames, tb = [], err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    owners = [_owner(f) for f in frames]
    last = max((i for i, o in enumerate(owners) if o == "vlcheck"), default=-1)
    deeper = [o for o in owners[last + 1:] if o in LIBRARIES]
    if deeper:
        return deeper[-1]
    if last + 1 < len(frames) and _top(frames[last + 1]) in VALIDATION:
        return "vllm"
    return "vlcheck"


def from_exception(family: str, check: str, err: BaseException, where: str = "") -> CheckResult:
    """An exception met while running a check: `fail` when vLLM or transformers raised it (their
    rejection or bug is the finding), `error` when vlcheck's own code did (`raised_by`)."""
    owner = raised_by(err)
    if owner == "vlcheck":
        return crashed(family, check, err, where)
    prefix = f"{where} " if where else ""
    text = str(err).splitlines()[0][:300] if str(err) else ""
    return CheckResult(family, check, Status.FAIL, f"{prefix}{owner} raised {type(err).__name__}: {text}")


NOT_APPLIED = "declaration_not_applied"
"""Data key (per variant) naming a declaration that was out of its versions; a marker, not a measured fact."""


def declared_deviation(result: CheckResult, variant, declared_as: str | None = None) -> CheckResult:
    """A failure the variant declares (`deviations.<check>`, or `declared_as`) becomes a declared
    deviation: reported with the spec's reason, keeping the failure's evidence. A declaration
    measured on other versions than the installed ones does not apply: the result stays as it is
    and says so, so a fix shows as `pass` and a new breakage as `fail`."""
    key = declared_as or result.check
    declared = variant.deviations.get(key)
    if declared is None or result.status not in (Status.FAIL, Status.PASS):
        return result
    if variant.deviation(key) is None:
        if result.data.get(f"{variant.kind}.{NOT_APPLIED}") == key:
            return result  # already checked plainly (a check's own call, then per_variant's)
        from vlcheck.core.versions import describe

        note = (f" (the spec's deviations.{key}, measured on {declared.scope}, does not apply to "
                f"{describe()}: checked plainly)")
        finding = (result.finding or result.reason) if result.status is Status.FAIL else ""
        return CheckResult(result.family, result.check, result.status, result.reason + note, result.details,
                           {**result.data, f"{variant.kind}.{NOT_APPLIED}": key}, finding)
    if result.status is Status.PASS:
        return CheckResult(result.family, result.check, result.status,
                           result.reason + f" (deviations.{key} is declared for {declared.scope} but did not happen)",
                           result.details, result.data)
    return CheckResult(result.family, result.check, Status.DEVIATION, f"[{variant.kind}] {declared.reason}",
                       result.details or [result.reason], result.data, result.finding or result.reason)


ORDER = [Status.ERROR, Status.FAIL, Status.DEVIATION, Status.PASS, Status.SKIP]
"""Worst first: a cell holding any error cannot be trusted whole, so error outranks fail."""


def combine(family: str, check: str, results: list[CheckResult]) -> CheckResult:
    """One result from several (per variant): the worst status wins; skips only if all skip."""
    if not results:
        return CheckResult(family, check, Status.SKIP, "nothing to check")
    worst = min((r.status for r in results), key=ORDER.index)
    picked = [r for r in results if r.status is worst]
    return CheckResult(
        family, check, worst,
        reason="; ".join(dict.fromkeys(r.reason for r in picked if r.reason)),
        details=[d for r in results for d in r.details],
        data={k: v for r in results for k, v in r.data.items()},
        finding="; ".join(dict.fromkeys(r.finding or r.reason for r in results
                                        if r.status in (Status.FAIL, Status.DEVIATION))),
    )
