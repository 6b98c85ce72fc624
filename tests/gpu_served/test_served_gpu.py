"""The served path on a GPU: a real `vllm serve` per family-config (the GPU tier's checkpoint and
the example's flags), driven with the official `openai` client.

- a chat completion and its streamed twin give the same text;
- `usage.prompt_tokens` equals the CPU render server's token count for the same request;
- a stop token ends the answer (`finish_reason` "stop");
- uuid resends hit the processor cache, as the server's Prometheus `/metrics` counts them;
- isolation under concurrency: N concurrent requests with the same text and different images
  (prefix caching on) each answer what the same request answers alone (vLLM's
  check_logprobs_close rule), and so do requests interleaved under a processor cache small
  enough to evict;
- bad requests get a 4xx and the server keeps serving.

A server per family-config is a second engine (a third for the small processor cache): these run
for the family-configs `--vlcheck-serve` selects (`all`, a family, a family-config), and skip
saying so otherwise; `scripts/gpu-tier.sh --vlcheck-serve all -k test_served_gpu` runs them alone.

`VLCHECK_SERVE_COMMAND=api_server` starts vLLM's module entry point instead of `vllm serve`
(vLLM's CPU build, for the CPU engine tier).
"""

from __future__ import annotations

import functools
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from vlcheck.gpu.engines import EngineUnavailable
from vlcheck.gpu.goldens import logprobs_close as compare
from vlcheck.gpu.served import EngineServer, as_golden, metric, start_engine_server
from vlcheck.prompt.render import default_questions
from vlcheck.served.requests import chat_messages, data_url, items
from vlcheck.served.render import NotServable
from vlcheck.served.server import ServerFailed
from vlcheck.spec.schema import config_id

pytestmark = pytest.mark.gpu

COMMAND = os.environ.get("VLCHECK_SERVE_COMMAND", "vllm serve")
CONCURRENT = 4
DEATH_GRACE_S = 15
"""After a failed request, how long the server may take to exit when its engine core died."""
GREEDY = {"temperature": 0.0, "max_tokens": 8, "logprobs": True, "top_logprobs": 5,
          "extra_body": {"return_tokens_as_token_ids": True}}


class _Servers:
    """One live server at a time (a GPU holds one family-config's engine; asking for another stops it).
    A server that did not start is not started again for the next test: its error is repeated."""

    def __init__(self):
        self.key, self.current = None, None
        self.failed: dict[tuple, tuple[str, str]] = {}

    def get(self, family, variant, weights: str, **extra) -> EngineServer:
        key = (family.name, variant.kind, weights, json.dumps(extra, sort_keys=True))
        if key in self.failed:
            outcome, message = self.failed[key]
            {"skip": pytest.skip, "xfail": pytest.xfail}.get(outcome, lambda m: pytest.fail(m, pytrace=False))(message)
        if key == self.key:
            self.raise_if_died(family, variant, grace_s=0)  # died after the test that used it last
        if key != self.key:
            self.close()
            try:
                self.current = start_engine_server(family, variant, weights, COMMAND, extra or None)
            except EngineUnavailable as err:
                self.failed[key] = ("skip" if err.skip else "fail", str(err))
                return self.get(family, variant, weights, **extra)
            except NotServable as err:  # no chat template offline: what a user's server would render is unknown
                self.failed[key] = ("skip", f"{family.name} [{variant.kind}]: {err}")
                return self.get(family, variant, weights, **extra)
            except ServerFailed as err:
                message = f"{family.name} [{variant.kind}] served: the server did not start: {err}"
                declared = variant.deviation("generation")  # an engine known not to start or serve
                if "value too large" in str(err) and "mm_processor_cache_gb" in extra:
                    self.failed[key] = ("skip", f"{family.name} [{variant.kind}]: vLLM refused the processor cache sized "
                                                f"for eviction ({extra['mm_processor_cache_gb'] * 2**30 / 1e6:.2f} MB, "
                                                f"{DISTINCT - 1} items as vLLM's processor makes them here): its engine's "
                                                "startup profile put a larger item in it ('value too large'); eviction "
                                                "not tested")
                else:
                    self.failed[key] = ("xfail", f"declared deviation: {declared} ({message})") if declared else ("fail", message)
                return self.get(family, variant, weights, **extra)
            self.key = key
        return self.current

    def raise_if_died(self, family, variant, grace_s: float = DEATH_GRACE_S) -> None:
        """A test failed (or the next one starts: `grace_s=0`): if the server's engine died under it
        (vLLM ends the server when its engine core dies), that is the outcome, declared
        (`generation`: xfail) or not (a failure quoting the engine's last words), and every later
        test of the family-config repeats it at once."""
        if self.current is None:
            return
        deadline = time.monotonic() + grace_s  # a 500 from a dying engine comes before the server exits
        while self.current.server.alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        if self.current.server.alive():
            return
        from vlcheck.served.server import log_tail

        message = (f"{family.name} [{variant.kind}] served: the engine died while serving "
                   f"({self.current.server.log}):\n{log_tail(self.current.server.log)}")
        declared = variant.deviation("generation")
        self.failed[self.key] = ("xfail", f"declared deviation: {declared} ({message})") if declared else ("fail", message)
        key, self.current, self.key = self.key, None, None
        outcome, text = self.failed[key]
        {"xfail": pytest.xfail}.get(outcome, lambda m: pytest.fail(m, pytrace=False))(text)

    def close(self):
        if self.current is not None:
            self.current.server.stop()
        self.key, self.current = None, None


_servers = _Servers()


def _engine_may_die(test):
    """A test that fails because the server's engine died ends as the death's outcome (see
    `_Servers.raise_if_died`), not as the connection error it caused."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        try:
            return test(*args, **kwargs)
        except Exception:
            _servers.raise_if_died(kwargs["family"], kwargs["variant"])
            raise
    return run


def _selected(family, variant, request) -> None:
    """A real server is a second engine per family-config (a third for the small processor
    cache): the served checks run for the family-configs --vlcheck-serve names."""
    from vlcheck.gpu.engines import platform_unavailable

    why_not = platform_unavailable("gpu")
    if why_not:
        pytest.skip(why_not)
    if family.synthetic is None or family.synthetic.unsupported:
        pytest.skip(f"{family.name}: no synthetic checkpoint")
    wanted = set(request.config.getoption("--vlcheck-serve"))
    if not {"all", family.name, config_id(family, variant)} & wanted:
        pytest.skip("`vllm serve` is a second engine per family-config: select with --vlcheck-serve "
                    f"{config_id(family, variant)} (or {family.name}, or all)")


@pytest.fixture
def served(family, variant, request):
    _selected(family, variant, request)
    yield _servers.get(family, variant, request.config.getoption("--vlcheck-weights"), enable_prefix_caching=True)


def teardown_module():
    _servers.close()


def _client(served: EngineServer):
    from openai import OpenAI

    return OpenAI(base_url=served.server.url + "/v1", api_key="EMPTY", max_retries=0, timeout=120)


def _messages(variant, image_index: int = 0, uuid: str | None = None, empty: bool = False):
    modality = variant.primary_modality
    question = default_questions(variant, modality)[0]
    item = items(variant, modality, image_index + 1)[image_index]
    url = None if empty else data_url(modality, item)
    return chat_messages(variant, modality, question, 1, [uuid] if uuid else None, [url])


def _greedy(client, variant, messages):
    reply = client.chat.completions.create(model=variant.model, messages=messages, **GREEDY)
    return as_golden(reply.choices[0], reply.usage.prompt_tokens), reply


@_engine_may_die
def test_chat_and_stream_agree(family, variant, served):
    client = _client(served)
    messages = _messages(variant)
    whole = client.chat.completions.create(model=variant.model, messages=messages, temperature=0.0, max_tokens=16)
    streamed = "".join((chunk.choices[0].delta.content or "") for chunk in client.chat.completions.create(
        model=variant.model, messages=messages, temperature=0.0, max_tokens=16, stream=True) if chunk.choices)
    assert whole.choices[0].message.content == streamed, (
        f"{family.name} [{variant.kind}] served: the streamed answer differs from the whole one")


@_engine_may_die
def test_prompt_tokens_match_cpu_render(family, variant, served):
    from vlcheck.served.render import served_record

    record = served_record(family, variant)
    if isinstance(record, Exception):
        pytest.skip(f"{family.name} [{variant.kind}]: no CPU render to compare with: {str(record).splitlines()[0]}")
    shape = next(iter(record.renders))
    if not record.renders[shape].ok:
        pytest.skip(f"{family.name} [{variant.kind}]: the CPU render server rejected the request")
    reply = _client(served).chat.completions.create(model=variant.model, messages=_messages(variant), max_tokens=1)
    assert reply.usage.prompt_tokens == len(record.renders[shape].token_ids), (
        f"{family.name} [{variant.kind}] served: usage.prompt_tokens {reply.usage.prompt_tokens}, the CPU render "
        f"server counts {len(record.renders[shape].token_ids)} for the same request")


@_engine_may_die
def test_stop_token_ends_answer(family, variant, served):
    client = _client(served)
    first, _ = _greedy(client, variant, _messages(variant))
    if len(first["token_ids"]) < 3:
        pytest.skip(f"{family.name} [{variant.kind}]: fewer than 3 tokens generated")
    stop_id = first["token_ids"][2]
    reply = client.chat.completions.create(model=variant.model, messages=_messages(variant), temperature=0.0,
                                           max_tokens=8, extra_body={"stop_token_ids": [stop_id], "ignore_eos": True})
    assert reply.choices[0].finish_reason == "stop", (
        f"{family.name} [{variant.kind}] served: stop token {stop_id} did not end the answer "
        f"(finish_reason {reply.choices[0].finish_reason!r})")


@_engine_may_die
def test_uuid_hits_in_metrics(family, variant, served):
    client = _client(served)
    from vlcheck.served.client import Client

    http = Client(served.server.url, variant.model)
    uuid = f"vlcheck-metrics-{family.name}-{variant.kind}"
    first, _ = _greedy(client, variant, _messages(variant, 3, uuid))
    hits_before = metric(http.metrics(), "vllm:mm_cache_hits")
    again, _ = _greedy(client, variant, _messages(variant, 3, uuid, empty=True))
    hits_after = metric(http.metrics(), "vllm:mm_cache_hits")
    assert hits_after > hits_before, (f"{family.name} [{variant.kind}] served: an empty part with a known uuid "
                                      f"added no vllm:mm_cache_hits ({hits_before} -> {hits_after})")
    assert again["prompt_tokens"] == first["prompt_tokens"], (
        f"{family.name} [{variant.kind}] served: uuid resend {again['prompt_tokens']} prompt tokens, first {first['prompt_tokens']}")
    problems = compare([first], [again])
    assert not problems, f"{family.name} [{variant.kind}] served: uuid resend answers differently: {problems}"


@_engine_may_die
def test_isolation_under_concurrency(family, variant, served):
    """Same text, different images, sent together (prefix caching on: the text prefix is shared):
    each answer is the one the request gets alone."""
    client = _client(served)
    alone = [_greedy(client, variant, _messages(variant, i))[0] for i in range(CONCURRENT)]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        together = list(pool.map(lambda i: _greedy(client, variant, _messages(variant, i))[0], range(CONCURRENT)))
    problems = compare(alone, together)
    assert not problems, f"{family.name} [{variant.kind}] served: concurrent requests answer differently: {problems}"


@_engine_may_die
def test_bad_requests_get_4xx(family, variant, served):
    from vlcheck.served.bad_requests import run_cases
    from vlcheck.served.client import Client
    from vlcheck.served.render import Rendered

    http = Client(served.server.url, variant.model)

    def send(messages, timeout_s):
        return http.chat(messages, timeout_s=timeout_s, temperature=0.0, max_tokens=4)

    def fingerprint(reply):
        body = reply.body if isinstance(reply.body, dict) else {}
        return body.get("usage", {}).get("prompt_tokens"), [c["message"]["content"] for c in body.get("choices", [])]

    from vlcheck.served.launch import serve_limit

    outcomes = run_cases(http, family, variant, Rendered(f"{variant.primary_modality} x1", 200), serve_limit(variant),
                         send, fingerprint)
    failures = [f"{o.case}: {o.failure} ({o.summary})" for o in outcomes if o.failure]
    assert not failures, f"{family.name} [{variant.kind}] served bad requests:\n" + "\n".join(failures)
    assert http.models(), f"{family.name} [{variant.kind}] served: the server stopped answering after the bad requests"


DISTINCT = 4
"""Images the small-cache check cycles through, under a cache of DISTINCT - 1 of them: LRU misses
every one of a cycle longer than it holds. Sized from this process's estimate of an item, which
the engine's own processor exceeded on vLLM's CPU build (a 1.6 MB cache for an estimated 1.1 MB
image: "value too large"), so the cache has room for that, and the cycle still evicts."""


def _cache_sized_to_evict(family, variant, weights: str) -> tuple[dict, list]:
    """(server args, images): the example's images only (the other modalities' limits 0), the startup
    profile's dummy image made as small as they are (`--limit-mm-per-prompt`'s width and height), and
    a processor cache of DISTINCT - 1 items. The profile puts its largest item of each modality in
    the cache, and vLLM refuses to start when one is larger than the whole cache (cachetools
    "value too large"; measured on qwen2_vl: a 12 MB image and a 36 MB video against 1 MB)."""
    from vlcheck.adapter.processor import processed_bytes, profile_media
    from vlcheck.gpu.engines import engine_args

    try:
        args, _, local = engine_args(family, variant, weights)
    except EngineUnavailable as err:  # no checkpoint: skip or fail as the shared server's tests do
        (pytest.skip if err.skip else pytest.fail)(str(err))
    images = items(variant, "image", DISTINCT)
    width, height = max(i.size[0] for i in images), max(i.size[1] for i in images)
    count = (args.get("limit_mm_per_prompt") or {}).get("image", 1)
    limits = {m: 0 for m in (args.get("limit_mm_per_prompt") or {})}
    limits["image"] = {"count": getattr(count, "count", count), "width": width, "height": height}
    args["limit_mm_per_prompt"] = limits
    why_not = f"{family.name} [{variant.kind}]: cannot size a processor cache that evicts:"
    try:
        profiled = profile_media(local, args)["image"]
        if profiled.size[0] > width or profiled.size[1] > height:
            pytest.skip(f"{why_not} the startup profile's image is {profiled.size[0]}x{profiled.size[1]}: this "
                        f"family's dummy inputs ignore --limit-mm-per-prompt's width and height ({width}x{height})")
        images = [image.resize(profiled.size) for image in images]  # all alike: the cache holds one
        sizes = [processed_bytes(local, args, "image", image) for image in [profiled, *images]]
    except Exception as err:  # noqa: BLE001 - vLLM's processor on the profile's image: nothing to size with
        pytest.skip(f"{why_not} vLLM's processor on the startup profile's image raised {type(err).__name__}: "
                    f"{str(err)[:300]}")
    cache = (DISTINCT - 1) * max(sizes)
    if DISTINCT * min(sizes[1:]) <= cache:
        pytest.skip(f"{why_not} the startup profile's image ({sizes[0] / 1e6:.2f} MB processed) needs a cache "
                    f"that holds {DISTINCT} of the example's images ({min(sizes[1:]) / 1e6:.2f} MB each)")
    return {"limit_mm_per_prompt": limits, "mm_processor_cache_gb": round(cache / 2**30, 6)}, images


@_engine_may_die
def test_interleaved_under_small_processor_cache(family, variant, request):
    """Under a processor cache smaller than the cycle of images sent twice (A, B, C, D, A, B, C, D),
    each answers as alone, and the server's /metrics show every request missed (else the cache did
    not evict and nothing was tested).
    Last in the module: it needs its own server (the others share the default one)."""
    _selected(family, variant, request)
    if "image" not in variant.modalities:
        pytest.skip(f"{family.name} [{variant.kind}]: sized with images; this family-config takes none")
    weights = request.config.getoption("--vlcheck-weights")
    sized, images = _cache_sized_to_evict(family, variant, weights)
    served = _servers.get(family, variant, weights, enable_prefix_caching=True, **sized)
    from vlcheck.served.client import Client

    http = Client(served.server.url, variant.model)
    client = _client(served)
    question = default_questions(variant, "image")[0]

    def ask(i):
        return _greedy(client, variant, chat_messages(variant, "image", question, 1, None, [data_url("image", images[i])]))[0]

    order = [*range(DISTINCT), *range(DISTINCT)]
    alone = {i: ask(i) for i in sorted(set(order))}
    queries, hits = metric(http.metrics(), "vllm:mm_cache_queries"), metric(http.metrics(), "vllm:mm_cache_hits")
    answers = [ask(i) for i in order]
    misses = (metric(http.metrics(), "vllm:mm_cache_queries") - queries) - (metric(http.metrics(), "vllm:mm_cache_hits") - hits)
    request.node.user_properties += [("processor_cache_mb", round(sized["mm_processor_cache_gb"] * 2**30 / 1e6, 3)),
                                     ("interleaved_cache_misses", misses)]
    problems = compare([alone[i] for i in order], answers)
    assert not problems, f"{family.name} [{variant.kind}] served: interleaved requests answer differently: {problems}"
    assert misses >= len(order), (
        f"{family.name} [{variant.kind}] served: a {sized['mm_processor_cache_gb'] * 2**30 / 1e6:.2f} MB processor cache missed "
        f"{misses:g} of {len(order)} interleaved requests: it did not evict, so eviction was not tested")
