"""vLLM's OpenAI-compatible server, started for real per family-config (`vlcheck/gpu/api_server.py`)
with the offline engine's args, driven over HTTP as a user's client does: the chat answer equals
the offline engine's (`LLM.chat`, same weights and template), its streamed twin says the same,
usage and `/metrics` count what was served, and concurrent requests do not leak into each other.
Images only (the example's image requests as `image_url` data URLs). A server per family-config
is a second engine: selected with --vlcheck-serve FAMILY|all."""

import base64
import io
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from vlcheck.core import media
from vlcheck.gpu import api_server as api_server_module
from vlcheck.gpu import goldens
from vlcheck.prompt.render import default_questions

pytestmark = pytest.mark.engine  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin

NEW_TOKENS = 6
CONCURRENT = 4


def _data_url(index: int) -> str:
    buf = io.BytesIO()
    media.image(index, media.IMAGE_SIZES[0]).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _messages(variant, first_image: int) -> list[dict]:
    count = 1 if variant.kind == "single" else 2
    parts = [{"type": "image_url", "image_url": {"url": _data_url(first_image + i)}} for i in range(count)]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": default_questions(variant, "image")[0]}]}]


def _body(messages, **extra) -> dict:
    return {"model": api_server_module.SERVED_NAME, "messages": messages, "temperature": 0.0, "max_tokens": NEW_TOKENS, "logprobs": True,
            "top_logprobs": 5, "return_tokens_as_token_ids": True, **extra}


def _token_id(token: str) -> int:
    return int(token.rpartition(":")[2])  # "token_id:123"


def _as_golden(answer: dict) -> dict:
    """An HTTP answer in goldens' form: prompt tokens, token ids, top-5 logprobs."""
    content = answer["choices"][0]["logprobs"]["content"]
    return {"prompt_tokens": answer["usage"]["prompt_tokens"], "token_ids": [_token_id(c["token"]) for c in content],
            "top_logprobs": [{str(_token_id(t["token"])): round(t["logprob"], 4) for t in c["top_logprobs"]}
                             for c in content]}


def _chat(server, messages, **extra) -> dict:
    import httpx

    reply = httpx.post(f"{server.url}/v1/chat/completions", json=_body(messages, **extra), timeout=120, trust_env=False)
    assert reply.status_code == 200, f"{reply.status_code}: {reply.text[:500]}"
    return reply.json()


def _needs_images(variant):
    if "image" not in variant.modalities:
        pytest.skip(f"{variant.kind}: the served checks send images; this example has {', '.join(variant.modalities)}")


def test_served_chat_equals_offline_engine(family, variant, api_server, engine, request):
    _needs_images(variant)
    server, template = api_server
    messages = _messages(variant, 0)
    served = _as_golden(_chat(server, messages))
    offline = goldens.from_outputs(engine.llm.chat(messages, _offline_params(), chat_template=template, use_tqdm=False))[0]
    request.node.user_properties.append(("server_start_s", round(server.start_seconds, 1)))
    problems = goldens.within_noise([offline], [served], goldens.NOISE_TOLERANCE)
    assert not problems, f"{family.name}: the server answers otherwise than the offline engine:\n" + "\n".join(problems)


def _offline_params():
    from vlcheck.gpu.gpu_checks import greedy

    return greedy(max_tokens=NEW_TOKENS, logprobs=5)


def test_streamed_twin_says_the_same(family, variant, api_server):
    import httpx

    _needs_images(variant)
    server, _ = api_server
    messages = _messages(variant, 1)
    whole = _chat(server, messages)
    text, usage = "", None
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", timeout=120, trust_env=False,
                      json=_body(messages, stream=True, stream_options={"include_usage": True})) as reply:
        assert reply.status_code == 200, reply.read()[:500]
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            usage = chunk.get("usage") or usage
            text += "".join(c["delta"].get("content") or "" for c in chunk.get("choices", []))
    assert text == whole["choices"][0]["message"]["content"], (text, whole["choices"][0]["message"]["content"])
    assert usage is not None and usage["prompt_tokens"] == whole["usage"]["prompt_tokens"] \
        and usage["completion_tokens"] == whole["usage"]["completion_tokens"], (usage, whole["usage"])


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#") and line[len(name)] in " {")


def test_metrics_count_what_was_served(family, variant, api_server):
    import httpx

    _needs_images(variant)
    server, _ = api_server
    before = httpx.get(f"{server.url}/metrics", trust_env=False).text
    answer = _chat(server, _messages(variant, 40))
    after = httpx.get(f"{server.url}/metrics", trust_env=False).text
    prompt = _metric(after, "vllm:prompt_tokens_total") - _metric(before, "vllm:prompt_tokens_total")
    generated = _metric(after, "vllm:generation_tokens_total") - _metric(before, "vllm:generation_tokens_total")
    queries = _metric(after, "vllm:mm_cache_queries_total") - _metric(before, "vllm:mm_cache_queries_total")
    assert (prompt, generated) == (answer["usage"]["prompt_tokens"], answer["usage"]["completion_tokens"]), (
        f"{family.name}: /metrics counted {prompt} prompt and {generated} generated tokens, usage says {answer['usage']}")
    assert queries == (1 if variant.kind == "single" else 2), f"{family.name}: {queries} processor-cache queries"


def test_concurrent_requests_stay_apart(family, variant, api_server, engine):
    """Each of CONCURRENT requests with its own images, sent at once, answers as it does alone."""
    _needs_images(variant)
    server, _ = api_server
    conversations = [_messages(variant, 60 + 3 * i) for i in range(CONCURRENT)]
    alone = [_as_golden(_chat(server, m)) for m in conversations]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        together = [_as_golden(a) for a in pool.map(lambda m: _chat(server, m), conversations)]
    problems = goldens.within_noise(alone, together, goldens.NOISE_TOLERANCE)
    assert not problems, f"{family.name}: concurrent answers differ from the same requests alone:\n" + "\n".join(problems)
    assert len({json.dumps(a["top_logprobs"][0], sort_keys=True) for a in alone}) > 1, (
        f"{family.name}: {CONCURRENT} different images gave identical first-step logprobs: the answers cannot show a leak")
