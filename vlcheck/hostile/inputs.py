"""Bad and hostile inputs, and what each family does with them.

Every case runs through vLLM's processor (CPU: with the processor cache on, as served, and off)
or engine (GPU) and ends in one outcome:
- handled: processed, with one placeholder range per item (and how: token counts, converted);
- rejected: a clear error (its message, shortened);
- broken: a crash with an internal error, a hang, or a wrong placeholder count.
Handled and rejected are locked in the family's snapshot, so an upgrade that changes them shows;
broken fails the test.
"""

from __future__ import annotations

import re
import signal
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from vlcheck.core import media
from vlcheck.core.results import NOT_APPLIED, CheckResult, Status, SuiteError, frames_of, from_exception, root_cause
from vlcheck.core.versions import describe
from vlcheck.hostile.guard import ChildError, Hang, OverMemory, guarded_calls
from vlcheck.spec.hostile_cases import CASES, Case
from vlcheck.spec.schema import Variant

TIMEOUT_S = 60

# Exceptions that state a problem with the input: a clear rejection. Anything else (AssertionError,
# IndexError, KeyError, ZeroDivisionError, ...) escaping vLLM is an internal failure: broken.
CLEAR_ERRORS = ("ValueError", "TypeError", "VLLMValidationError", "UnidentifiedImageError", "OSError",
                "DecompressionBombError", "NotImplementedError")
# vLLM states some input problems as RuntimeError; these messages are clear about the cause.
CLEAR_MESSAGES = re.compile(r"Expected there to be \d+ prompt placeholders|At most \d+ \w+\(s\) may be provided|"
                            r"Failed to apply prompt replacement")


@dataclass
class Outcome:
    case: str
    kind: str  # one of SEVERITY
    how: str
    frames: list[dict] = field(default_factory=list, compare=False)
    """Where the exception behind a rejected or broken outcome was raised (`core.results.frames_of`):
    evidence for the result, never part of the outcome's line (snapshots and facts compare those)."""

    def line(self) -> str:
        return f"{self.case}: {self.kind}: {self.how}"


SEVERITY = ("not applicable", "handled", "rejected", "broken")


MEMORY_LIMIT_GB = 4
"""What one case may allocate beyond the already-loaded processor before it counts as broken."""


@contextmanager
def deadline(seconds: int):
    """Raise Hang if the block runs longer than `seconds` (main thread only; else no limit)."""
    def alarm(*_):
        raise Hang(f"no answer after {seconds} s")

    try:
        previous = signal.signal(signal.SIGALRM, alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def shorten(message: str, limit: int = 160) -> str:
    """An error message without addresses, paths and object ids, so snapshots are stable."""
    text = re.sub(r"0x[0-9a-f]+", "0x…", message.splitlines()[0] if message else "")
    text = re.sub(r"(/[\w.\-]+)+/", "…/", text)
    text = re.sub(r"\d{5,}", "N", text)
    return text[:limit]


def error_outcome(case: str, err: BaseException) -> Outcome:
    """The outcome of a case that raised `err` (`classify_error`), with where it was raised."""
    frames = err.frames if isinstance(err, ChildError) else frames_of(err)
    return Outcome(case, *classify_error(err), frames=frames)


def classify_error(err: BaseException) -> tuple[str, str]:
    if isinstance(err, Hang):
        return "broken", f"hang: {err}"
    if isinstance(err, OverMemory):
        return "broken", f"resource blow-up: {err}"
    if isinstance(err, ChildError) and err.cause_name == "MemoryError":
        return "broken", f"resource blow-up: {err.name} <- MemoryError (over {MEMORY_LIMIT_GB} GB)"
    if isinstance(err, ChildError):
        clear = any(n in CLEAR_ERRORS for n in err.cause_mro) or bool(CLEAR_MESSAGES.search(err.cause_message))
        where = f"{err.name} <- " if (err.name, str(err)) != (err.cause_name, err.cause_message) else ""
        return ("rejected" if clear else "broken"), f"{where}{err.cause_name}: {shorten(err.cause_message)}"
    cause = root_cause(err)
    clear = any(c.__name__ in CLEAR_ERRORS for c in type(cause).__mro__) or bool(CLEAR_MESSAGES.search(str(cause)))
    where = f"{type(err).__name__} <- " if cause is not err else ""
    return ("rejected" if clear else "broken"), f"{where}{type(cause).__name__}: {shorten(str(cause))}"


def prompt_for(spec, variant: Variant, modality: str, question: str, count: int) -> str:
    """The family's prompt for any question and item count (also beyond the example's limit)."""
    from vlcheck.prompt.render import render_prompt
    from vlcheck.prompt.templates import chat_renderer

    return render_prompt(spec, variant, modality, question, count, chat_renderer(), within_limits=False)


def case_requests(spec, variant: Variant):
    """Each case as (case, request): the request is (prompt, modality, media, item count), or an
    Outcome when the case does not apply. Raises TemplateUnavailable before the first case when
    the family's prompt needs a chat template that is not available."""
    from vlcheck.prompt.render import default_questions

    modality = variant.primary_modality
    default_question = default_questions(variant, modality)[0]
    prompt_for(spec, variant, modality, default_question, 1)
    for case in (c for c in CASES if c.applies_to(variant)):
        question = case.question(variant, modality) if case.question else default_question
        data = case.data(variant, modality) if case.data else (modality, media.items(modality, 1)[0], 1)
        if data is None:
            yield case, Outcome(case.name, "not applicable", f"the family takes {', '.join(variant.modalities)}")
            continue
        data_modality, value, count = data
        prompt_modality = data_modality if data_modality in variant.modalities else modality
        yield case, (prompt_for(spec, variant, prompt_modality, question, count), data_modality, value, count)


def run_cases(spec, variant: Variant, attempt: Callable[..., Outcome]) -> list[Outcome]:
    """Each case's outcome: `attempt(case, prompt, modality, media, count)` for those that apply."""
    return [request if isinstance(request, Outcome) else attempt(case, *request)
            for case, request in case_requests(spec, variant)]


def run_cpu(spec, variant: Variant) -> list[Outcome]:
    """Every case through vLLM's processor on the family's synthetic checkpoint, as a served
    request goes through it (processor cache on, the engine's default) and with the cache off
    (`mm_processor_cache_gb=0`); where the two differ, the outcome names both, and takes the
    worse kind. The cases run in guarded children (`vlcheck.hostile.guard`), a batch per child."""
    from vlcheck import adapter
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.prompt.render import default_questions

    local = model_files(spec, variant)
    modality = variant.primary_modality
    args = variant.engine_args_for(modality, variant.most_items)
    max_len = args.get("max_model_len")
    example = (prompt_for(spec, variant, modality, default_questions(variant, modality)[0], 1),
               {modality: media.items(modality, 1)[0]})
    processors: dict[tuple[str, bool], Any] = {}

    def processor(m: str, cached: bool):
        if (m, cached) not in processors:
            extra = variant.engine_args_for(m, variant.most_items) if m in variant.modalities else {
                **args, "limit_mm_per_prompt": {**(args.get("limit_mm_per_prompt") or {}), m: 1}}
            processors[m, cached] = _warmed_up(adapter.create_processor(str(local), extra, cached=cached), example)
        return processors[m, cached]

    def path_outcome(case: Case, answer: tuple[Any, Exception | None], data_modality: str, count: int) -> Outcome:
        out, error = answer
        if isinstance(error, ChildError) and error.owner == "vlcheck":
            raise SuiteError(f"{spec.name} [{variant.kind}] hostile case {case.name!r}: vlcheck crashed in the guarded "
                             f"child: {error.name}: {error}")
        if error is not None:
            return error_outcome(case.name, error)
        ranges = out["placeholders"].get(data_modality, [])
        tokens = len(out["prompt_token_ids"])
        if len(ranges) != count:
            return Outcome(case.name, "broken", f"{len(ranges)} placeholder range(s) for {count} item(s)")
        how = f"{tokens} prompt tokens, item tokens {[length for _, length in ranges]}"
        if max_len and tokens > max_len:
            how += f" (over max_model_len {max_len}: the engine must reject it)"
        return Outcome(case.name, "handled", how)

    requests = list(case_requests(spec, variant))
    calls = [partial(_from_empty_cache, processor(data_modality, cached), prompt, {data_modality: value})
             for _, request in requests if not isinstance(request, Outcome)
             for prompt, data_modality, value, _ in [request] for cached in (True, False)]
    answers = iter(guarded_calls(calls, TIMEOUT_S, MEMORY_LIMIT_GB))
    outcomes = []
    for case, request in requests:
        if isinstance(request, Outcome):
            outcomes.append(request)
            continue
        _, data_modality, _, count = request
        served = path_outcome(case, next(answers), data_modality, count)
        outcomes.append(both_paths(served, path_outcome(case, next(answers), data_modality, count)))
    return outcomes


def _warmed_up(processor, example: tuple[str, dict]):
    """The processor after one plain request (the example's): vLLM builds the HF processor, and
    imports its modules, on the first request, which otherwise every guarded child redoes."""
    from vlcheck import adapter

    try:
        adapter.apply_processor(processor, *example)
    except Exception as err:  # noqa: BLE001 - a processor that vLLM fails here is what the cases are for
        from vlcheck.core.results import raised_by

        if raised_by(err) == "vlcheck":
            raise
    return processor


def _from_empty_cache(processor, prompt: str, mm_data: dict) -> dict:
    """One case on one path (in a guarded child); every case starts from an empty processor
    cache, whatever ran before it."""
    from vlcheck import adapter

    processor.clear_cache()
    return adapter.apply_processor(processor, prompt, mm_data)


def both_paths(served: Outcome, uncached: Outcome) -> Outcome:
    """One outcome for a case run with the processor cache on (`served`) and off: the served
    one where they agree, else both, as the worse kind."""
    # the same error, raised bare on one path and wrapped ("ValueError <- ...") on the other, is no difference
    if (served.kind, served.how.split(" <- ")[-1]) == (uncached.kind, uncached.how.split(" <- ")[-1]):
        return served
    kind = max(served.kind, uncached.kind, key=SEVERITY.index)
    worse = served if served.kind == kind else uncached
    return Outcome(served.case, kind, f"processor cache on: {served.kind}: {served.how} | "
                                      f"cache off: {uncached.kind}: {uncached.how}",
                   frames=worse.frames or served.frames or uncached.frames)


def document(spec, variant: Variant, outcomes: list[Outcome], where: str) -> str:
    lines = [f"# bad and hostile inputs ({where}): {spec.name} [{variant.kind}]"]
    lines += [o.line() for o in outcomes]
    return "\n".join(lines) + "\n"


def hostile_check(spec, variant: Variant) -> CheckResult:
    """The catalogue's `hostile` check: every case's outcome (fact `<variant>.hostile`, one line per
    case); fails on a broken outcome the spec does not list under `known_broken`, and on a listed
    case that no longer breaks (the entry is then stale: remove it or narrow its versions)."""
    from vlcheck.checkpoints.synthetic import NotBuildable
    from vlcheck.prompt.conformance import template_unavailable
    from vlcheck.prompt.templates import TemplateUnavailable

    where = f"[{variant.kind}]"
    if variant.deviation("processor") is not None:
        return CheckResult(spec.name, "hostile", Status.SKIP,
                           f"{where} {spec.name}: its processor is known broken: {variant.deviation('processor')}")
    try:
        outcomes = run_cpu(spec, variant)
    except NotBuildable as err:
        return CheckResult(spec.name, "hostile", Status.SKIP, f"{where} no checkpoint: {err}")
    except TemplateUnavailable as err:
        return template_unavailable(spec, "hostile", variant, err)
    except ImportError as err:
        return CheckResult(spec.name, "hostile", Status.SKIP,
                           f"{where} vLLM's processor for {spec.name} needs a package that is not installed: {err}")
    except SuiteError:
        raise
    except Exception as err:  # noqa: BLE001 - vLLM failing to build the processor fails; vlcheck's crash is an error
        return from_exception(spec.name, "hostile", err, where)
    data = {f"{variant.kind}.hostile": [o.line() for o in outcomes]}
    broken = [o for o in outcomes if o.kind == "broken"]
    undeclared = [o for o in broken if variant.broken_case(o.case) is None]
    stale = [c for c in variant.broken_cases if c not in {o.case for o in broken}]
    # Every broken case is named, declared or not, so that the same breakage reads the same inside
    # and outside its declaration's versions (`vlcheck diff` and the matrix compare behaviour).
    problems = [f"broken on vLLM's processor: {o.line()}" for o in broken]
    problems += [f"known_broken case {c!r} now works (remove it from the spec, or narrow its versions)" for c in stale]
    out_of_range = [o.case for o in undeclared if o.case in variant.known_broken]
    if out_of_range:
        data[f"{variant.kind}.{NOT_APPLIED}"] = "known_broken." + ", ".join(out_of_range)
    finding = f"{where} {spec.name}: {problems[0]}" if problems else ""
    # where the first broken case's exception was raised: of those the result is about
    frames = next((o.frames for o in (undeclared if undeclared or stale else broken) if o.frames), [])
    if undeclared or stale:
        note = "".join(f" (the spec's known_broken.{c!r}, measured on {variant.known_broken[c].scope}, does not "
                       f"apply to {describe()}: checked plainly)" for c in out_of_range)
        first = (f"broken on vLLM's processor: {undeclared[0].line()}" if undeclared
                 else f"known_broken case {stale[0]!r} now works (remove it from the spec, or narrow its versions)")
        return CheckResult(spec.name, "hostile", Status.FAIL, f"{where} {spec.name}: {first}{note}", problems, data,
                           finding, frames=frames)
    if broken:
        declared = "; ".join(f"{o.case}: {variant.broken_case(o.case).reason}" for o in broken)
        return CheckResult(spec.name, "hostile", Status.DEVIATION, f"{where} known_broken: {declared}", problems,
                           data, finding, frames=frames)
    counts = {k: sum(o.kind == k for o in outcomes) for k in SEVERITY}
    return CheckResult(spec.name, "hostile", Status.PASS,
                       f"{where} " + ", ".join(f"{n} {k}" for k, n in counts.items() if n), data=data)


UUID_REUSE = "uuid reused for a different image"


def run_gpu(spec, variant: Variant, handle) -> list[Outcome]:
    """Every case through a live engine; after each request that was not handled, the same
    engine must still answer a normal one. Plus the uuid-reuse case (cache keyed by uuid alone)."""
    from vlcheck.engine.engines import cache_counters
    from vlcheck.engine.runs import greedy, still_serves
    from vlcheck.prompt.render import default_questions

    llm = handle.llm
    default_question = default_questions(variant, variant.primary_modality)[0]
    def attempt(case: Case, prompt: str, data_modality: str, value: Any, count: int) -> Outcome:
        try:
            with deadline(TIMEOUT_S * 3):
                out = llm.generate([{"prompt": prompt, "multi_modal_data": {data_modality: value}}],
                                   greedy(max_tokens=2), use_tqdm=False)[0]
            outcome = Outcome(case.name, "handled", f"{len(out.prompt_token_ids)} prompt tokens, "
                                                    f"finish {out.outputs[0].finish_reason}")
        except Exception as err:  # noqa: BLE001 - every failure is an outcome to classify
            outcome = error_outcome(case.name, err)
        if outcome.kind != "handled" and not still_serves(spec, variant, handle):
            outcome = Outcome(case.name, "broken", outcome.how + "; the engine no longer answers a normal request",
                              frames=outcome.frames)
        return outcome

    outcomes = run_cases(spec, variant, attempt)

    if "image" in variant.modalities:
        prompt = prompt_for(spec, variant, "image", default_question, 1)
        uuid = f"{spec.name}-{variant.kind}-reused"
        a, b = media.image(11), media.image(12)
        first = llm.generate([{"prompt": prompt, "multi_modal_data": {"image": a}, "multi_modal_uuids": {"image": uuid}}],
                             greedy(), use_tqdm=False)[0]
        before = cache_counters(llm)
        second = llm.generate([{"prompt": prompt, "multi_modal_data": {"image": b}, "multi_modal_uuids": {"image": uuid}}],
                              greedy(), use_tqdm=False)[0]
        hits = cache_counters(llm)["hits"] - before["hits"]
        fresh = llm.generate([{"prompt": prompt, "multi_modal_data": {"image": b}}], greedy(), use_tqdm=False)[0]
        stale = hits >= 1
        same_as_a = list(second.outputs[0].token_ids) == list(first.outputs[0].token_ids)
        differs_from_b = list(second.outputs[0].token_ids) != list(fresh.outputs[0].token_ids)
        how = (f"the second image was answered from the first image's cache entry ({hits:.0f} hit): STALE FEATURES"
               if stale else "the second image was processed afresh (no cache hit)")
        how += f"; output equals image A's: {same_as_a}, differs from image B's own: {differs_from_b}"
        outcomes.append(Outcome(UUID_REUSE, "handled", how))
    return outcomes
