"""The outcome of one check on one family: what the report matrix and the tests share."""

from __future__ import annotations

import enum
import re
import sys
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

    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    """A report cell's family-configs (`single`, `multi_image`): each one's status, reason and
    finding (and frames, where it has them), so that a diff and `pytest --vlcheck-baseline`
    compare family-config by family-config."""

    frames: list[dict[str, Any]] = field(default_factory=list)
    """For a result caused by an exception: where it was raised (`frames_of`), innermost last.
    Evidence for people, never compared: line numbers move with every release, so they stay out
    of `reason`, `finding` and `data`."""


def crashed(family: str, check: str, err: BaseException, where: str = "") -> CheckResult:
    """An exception that escaped vlcheck's own code while running a check: an `error` cell."""
    prefix = f"{where} " if where else ""
    return CheckResult(family, check, Status.ERROR,
                       f"{prefix}vlcheck crashed (not a vLLM finding): {type(err).__name__}: {str(err)[:300]}",
                       frames=frames_of(err))


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
    return CheckResult(family, check, Status.FAIL, f"{prefix}{owner} raised {type(err).__name__}: {message_head(err)}",
                       frames=frames_of(err))


_HEADER_ONLY = re.compile(r"^\d+ validation errors? for \w+$")


def message_head(err: BaseException, limit: int = 300) -> str:
    """An exception's message in one line: its first, or where that is only pydantic's header
    ("1 validation error for ModelConfig", which vLLM's config classes raise for any cause) the
    lines that say what failed (CI's candidate: five families read the header alone)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if not lines:
        return ""
    if _HEADER_ONLY.match(lines[0]):
        said = [line for line in lines[1:] if not line.startswith("For further information")]
        return " | ".join([lines[0], *said])[:limit]
    return lines[0][:limit]


# --- where an exception was raised ------------------------------------------------------------

MAX_FRAMES = 3
"""The innermost frames a result keeps (plus the owning library's last one, when not among them)."""


def frames_of(err: BaseException, owner: str | None = None) -> list[dict[str, Any]]:
    """Where `err` was raised: its innermost `MAX_FRAMES` frames, innermost last, each
    `{"package", "file", "line", "function"}` (`frame_dict`), preceded by the innermost frame of
    the library that raised it (`owner`, default `raised_by(err)`) when that one is not among them:
    e.g. transformers' line that handed torch the bad shape, under torch's own frames.

    The traceback is followed into the exception `err` wraps (`raise X from cause`, or raised while
    handling it) when that one was caught on `err`'s own way up: its outermost frame is one of
    `err`'s frames. vLLM wraps what the HF processor raised ("Failed to apply X on data=...", raised
    from the processor's exception in vLLM's own frame): its innermost frames are vLLM's wrapping
    code, the wrapped exception's are where it went wrong. An exception met earlier somewhere else
    (a `__context__` from another call stack) is not followed, nor one its raiser set aside
    (`raise X from None`). `owner` is still decided on `err` alone (`raised_by`): following the
    chain shows where, never changes whose."""
    try:
        entries = _chain(err)
        if not entries:
            return []
        owner = owner or raised_by(err)
        inner = entries[-MAX_FRAMES:]
        picked = [e for e in reversed(entries) if _owner(e[0]) == owner][:1]
        if picked and not any(picked[0][0] is f for f, _ in inner):
            inner = picked + inner
        return [frame_dict(frame, line) for frame, line in inner]
    except Exception:  # noqa: BLE001 - evidence, never a reason for a check to crash
        return []


def _entries(err: BaseException) -> list[tuple[Any, int]]:
    out, tb = [], err.__traceback__
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def root_cause(err: BaseException) -> BaseException:
    """vLLM wraps processor errors ("Failed to apply X on data={...}"): the innermost one says why."""
    seen = set()
    while (err.__cause__ or err.__context__) is not None and id(err) not in seen:
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return err


def _chain(err: BaseException) -> list[tuple[Any, int]]:
    """(frame, line) of `err`'s traceback, outermost first, continued into the exceptions it wraps
    (`frames_of` says which)."""
    entries, seen = _entries(err), {id(err)}
    while True:
        inner = err.__cause__ if err.__cause__ is not None else (
            None if err.__suppress_context__ else err.__context__)
        if inner is None or id(inner) in seen:
            return entries
        more = _entries(inner)
        at = next((i for i, (frame, _) in enumerate(entries) if more and frame is more[0][0]), None)
        if at is None:
            return entries
        entries, err = entries[:at] + more, inner
        seen.add(id(err))


_SITE = re.compile(r".*/(?:site|dist)-packages/")


def source_path(path: str) -> str:
    """A source file as a report names it: relative to its site-packages folder, else to the
    checkout (`vlcheck/...`, `tests/...`), else to the `sys.path` entry holding it (the standard
    library); as it is otherwise (`<string>`, `<frozen ...>`). No machine's folders in a report."""
    found = _SITE.match(path)
    if found:
        return path[found.end():]
    if path.startswith(_CHECKOUT):
        return path[len(_CHECKOUT):]
    roots = [p.rstrip("/") + "/" for p in sys.path if p and path.startswith(p.rstrip("/") + "/")]
    return path[len(max(roots, key=len)):] if roots else path


def frame_dict(frame, line: int) -> dict[str, Any]:
    """`{"package": "transformers", "file": "transformers/models/x/processing_x.py", "line": 123,
    "function": "XProcessor.__call__"}`: `package` is the top-level module the code belongs to (in
    the checkout, its top folder: `vlcheck`, `tests`)."""
    path = frame.f_code.co_filename
    file = source_path(path)
    package = (frame.f_globals.get("__name__", "") or "").split(".")[0]
    if (path.startswith(_CHECKOUT) and not _SITE.match(path)) or package in ("", "__main__"):
        package = _package_of(file) or package
    return {"package": package, "file": file, "line": int(line),
            "function": getattr(frame.f_code, "co_qualname", frame.f_code.co_name)}


def _package_of(file: str) -> str:
    """The top-level module of a file named relative to its root (`source_path`); "" for others."""
    return "" if file.startswith(("/", "<")) else file.split("/")[0].removesuffix(".py")


_TRACEBACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_CHAINED = ("The above exception was the direct cause of the following exception",
            "During handling of the above exception, another exception occurred")


def frames_in_text(text: str) -> list[dict[str, Any]]:
    """Where the last exception printed in `text` (another process's log: a server's, an engine's)
    was raised: the innermost `MAX_FRAMES` frames of the first traceback of the last printed chain
    (Python prints the wrapped exception first), skipping a chain that says its root cause is
    above (vLLM's launcher after its engine core's); the package is read from the file's path
    (`source_path`), the function is the code's name. [] where the text holds no traceback.
    Log prefixes (`(EngineCore pid=1) ERROR ... [core.py:9]`) are ignored."""
    chains: list[dict] = []
    chained = False
    for line in (text or "").splitlines():
        if any(c in line for c in _CHAINED):
            chained = True
        elif "Traceback (most recent call last)" in line:
            if not chained or not chains:
                chains.append({"root": [], "blocks": 0, "above": False})
            chains[-1]["blocks"] += 1
            chained = False
        elif chains:
            found = _TRACEBACK_LINE.search(line)
            if found and chains[-1]["blocks"] == 1:
                file = source_path(found["file"])
                chains[-1]["root"].append({"package": _package_of(file), "file": file, "line": int(found["line"]),
                                           "function": found["function"]})
            if "root cause above" in line:
                chains[-1]["above"] = True
    usable = [c for c in chains if c["root"]]
    best = next((c for c in reversed(usable) if not c["above"]), usable[-1] if usable else None)
    return best["root"][-MAX_FRAMES:] if best else []


def frame_text(frame: dict[str, Any]) -> str:
    """One frame in one line: `transformers/models/x/processing_x.py:123 in XProcessor.__call__`."""
    return f"{frame.get('file')}:{frame.get('line')} in {frame.get('function')}"


def frames_text(frames: list[dict[str, Any]]) -> str:
    """Frames in one line, innermost last (for a diff's or a report's reader, never for a finding)."""
    return " > ".join(frame_text(f) for f in frames)


NOT_APPLIED = "declaration_not_applied"
"""Data key (per variant) naming a declaration that was out of its versions; a marker, not a measured fact."""


def declared_deviation(result: CheckResult, variant, declared_as: str | None = None) -> CheckResult:
    """A failure the variant declares (`deviations.<check>`, or `declared_as`) becomes a declared
    deviation: reported with the spec's reason, keeping the failure's evidence. One that names its
    findings covers those only: a failure with any other problem line stays a failure. A declaration
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
                           {**result.data, f"{variant.kind}.{NOT_APPLIED}": key}, finding, frames=result.frames)
    if result.status is Status.PASS:
        return CheckResult(result.family, result.check, result.status,
                           result.reason + f" (deviations.{key} is declared for {declared.scope} but did not happen)",
                           result.details, result.data)
    problems = result.details or [result.reason]
    uncovered = [p for p in problems if not declared.covers_finding(p)]
    if uncovered:  # a declaration covers the findings it names: any other finding fails the cell
        note = f" (deviations.{key} {declared.covers_only})"
        if result.reason.endswith(note):
            return result  # already held to it (a check's own call, then per_variant's)
        shown = result.reason.replace(problems[0], uncovered[0]) if problems[0] in result.reason else result.reason
        return CheckResult(result.family, result.check, Status.FAIL, shown + note,
                           uncovered + [p for p in problems if p not in uncovered], result.data,
                           result.finding or result.reason, frames=result.frames)
    return CheckResult(result.family, result.check, Status.DEVIATION, f"[{variant.kind}] {declared.reason}",
                       result.details or [result.reason], result.data, result.finding or result.reason,
                       frames=result.frames)


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
        frames=unique_frames(f for r in picked for f in r.frames),
    )


def unique_frames(frames) -> list[dict[str, Any]]:
    """Frames once each, in their first order (two family-configs failing in the same line)."""
    out, seen = [], set()
    for f in frames:
        key = (f.get("package"), f.get("file"), f.get("line"), f.get("function"))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
