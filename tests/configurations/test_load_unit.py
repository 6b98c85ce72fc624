"""The load configuration's judgement without a server: which requests it sends, how an answer
under load is held to the same request's answer alone, what a reused uuid's answer is called, the
eviction count read from the processor cache's counters, and the engine's death read from a log."""

from collections import Counter

from vlcheck.configurations import load
from vlcheck.configurations.load import Answer, CacheCounters, Request, Verdict
from vlcheck.served.client import Reply
from vlcheck.spec.registry import get_family

QWEN = get_family("qwen2_vl")
LLAVA = get_family("llava")


def golden(first_logprob: float = -0.5, prompt_tokens: int = 36, tokens=(449, 119)) -> dict:
    return {"prompt_tokens": prompt_tokens, "token_ids": list(tokens),
            "top_logprobs": [{str(tokens[0]): first_logprob, "7": -2.0}, {str(tokens[1]): -0.1, "8": -3.0}],
            "text": "ab"}


def test_the_requests_differ_in_size_carry_uuids_and_videos_only_where_the_example_takes_them():
    qwen, llava = load.request_set(QWEN.single), load.request_set(LLAVA.single)
    assert len({r.size for r in qwen.alone if r.modality == "image"}) >= 2
    assert len({r.uuid for r in qwen.alone}) == len(qwen.alone)
    assert [r.name for r in qwen.alone if r.modality == "video"] == ["video 0"]
    assert not [r for r in llava.alone if r.modality == "video"]
    assert qwen.alone[-1] == qwen.first  # sent last alone: the reused uuid's probe finds it cached
    assert qwen.first.size != qwen.other.size


def test_under_load_every_request_goes_again_with_its_uuid_only_resend_but_the_reused_uuids_image():
    requests = load.request_set(QWEN.single)
    sent = requests.under_load({"video 0"})
    names = [r.name for r in sent]
    assert requests.first.name not in names and f"{requests.first.name}, uuid only" not in names
    assert "video 0" not in names and "video 0, uuid only" in names  # refused alone: its item is not resent
    resend = next(r for r in sent if r.name == "image 1 (96x64), uuid only")
    assert not resend.with_data and resend.judged_against == "image 1 (96x64)" and resend.uuid == requests.alone[1].uuid
    assert requests.reused.uuid == requests.first.uuid and requests.reused.index == requests.other.index
    assert requests.reused not in sent


def test_a_chat_completion_becomes_a_golden_and_a_refusal_keeps_its_message():
    body = {"usage": {"prompt_tokens": 36}, "choices": [{"message": {"content": "ab"}, "logprobs": {"content": [
        {"token": "token_id:449", "top_logprobs": [{"token": "token_id:449", "logprob": -0.5},
                                                   {"token": "token_id:7", "logprob": -2.0}]},
        {"token": "token_id:119", "top_logprobs": [{"token": "token_id:119", "logprob": -0.1},
                                                   {"token": "token_id:8", "logprob": -3.0}]}]}}]}
    assert load.answer_of(Reply(200, body, 0.1)) == Answer(200, golden())
    refused = load.answer_of(Reply(400, {"error": {"message": "Cache miss for image at index 0\nmore"}}, 0.1))
    assert refused.says() == "400: Cache miss for image at index 0" and not refused.server_error
    assert load.answer_of(Reply(200, {"choices": []}, 0.1)).server_error  # a 200 that is no completion
    assert load.answer_of(Reply(None, None, 300.0, "no answer within 300 s")).says().startswith("no answer")


def test_an_answer_under_load_equals_alone_within_the_repeat_noise_or_is_a_4xx():
    request = Request("image 0", "image", 0, (64, 48), "u0")
    alone = {"image 0": Answer(200, golden())}
    assert load.judged(request, alone, Answer(200, golden(-0.5 + 0.004))) is None
    assert "moved beyond" in load.judged(request, alone, Answer(200, golden(-0.5 + 0.05)))
    assert load.judged(request, alone, Answer(400, message="Cache miss")) is None
    assert load.judged(request, alone, Answer(400)) == "400 without a message"
    assert load.judged(request, alone, Answer(500, message="EngineCore encountered an issue")).startswith("500")
    assert load.judged(request, alone, Answer(None, message="timeout")).startswith("no answer")
    resend = request.uuid_only()
    assert load.judged(resend, alone, Answer(200, golden())) is None  # held to its data request's answer


def test_a_reused_uuid_is_stale_new_refused_or_a_problem():
    first, other = Answer(200, golden(-0.5, 36)), Answer(200, golden(-1.5, 38))
    assert load.reused_outcome(Answer(200, golden(-0.5, 36)), first, other) == "stale"
    assert load.reused_outcome(Answer(200, golden(-1.5, 38)), first, other) == "new"
    assert load.reused_outcome(Answer(400, message="mismatch"), first, other) == "400: mismatch"
    neither = load.reused_outcome(Answer(200, golden(-3.0, 40)), first, other)
    assert neither == "neither image's answer" and load.reused_problem(neither)
    assert load.reused_problem("500: EngineCore encountered an issue")
    assert not load.reused_problem("stale") and not load.reused_problem("400: mismatch")


def test_a_verdict_counts_problems_per_request_and_the_4xx_messages():
    requests = load.request_set(LLAVA.single)
    alone = {r.name: Answer(200, golden(-0.5 - i)) for i, r in enumerate(requests.alone)}
    verdict = Verdict()
    image0 = requests.alone[0]
    for now in (Answer(200, golden(-0.5)), Answer(400, message="Cache miss for image"), Answer(500, message="boom"),
                Answer(500, message="boom")):
        verdict.add(image0, now, requests, alone)
    verdict.add(requests.reused, alone[requests.first.name], requests, alone)
    assert verdict.sent == 5 and verdict.refusals == Counter({"Cache miss for image": 1})
    assert verdict.reused == Counter({"stale": 1})
    assert verdict.problem_lines("under load", 2) == [f"under load, {image0.name}: 500: boom (2 of 2)"]
    assert verdict.summary() == "2 of 5 answers not"
    assert Verdict().summary() == "every 200 equal alone, every other answer a 4xx"


def test_misses_under_load_are_evictions_and_none_means_the_path_did_not_run():
    page = ('# HELP vllm:mm_cache_queries x\nvllm:mm_cache_queries_total{engine="0",model_name="vlcheck"} 30.0\n'
            'vllm:mm_cache_hits_total{engine="0",model_name="vlcheck"} 21.0\n')
    during = CacheCounters.read(page) - CacheCounters(10.0, 8.0)
    assert during == CacheCounters(20.0, 13.0) and during.misses == 7
    proof = load.cache_proof(during, Counter({"Cache miss for image at index 0 but data is not provided.": 3,
                                              "value too large": 2}))
    assert proof == {"mm_cache_queries": 20, "mm_cache_hits": 13, "misses_on_items_sent_before": 7,
                     "cache_miss_refusals": 3}
    assert load.no_eviction(during, 5) is None
    assert "evicted nothing: 20 queries under load, all 20 hits" in load.no_eviction(CacheCounters(20.0, 20.0), 5)
    assert "nothing could be cached" in load.no_eviction(during, 0)
    assert "died" in load.no_eviction(None, 5)


def test_the_engines_death_is_read_from_its_workers_last_error_not_the_api_servers():
    log = "\n".join([
        "(APIServer pid=1) AssertionError: Expected code to be unreachable, but got: None",
        "(Worker pid=3) ERROR [multiproc_executor.py:1000] RuntimeError: shape mismatch: value tensor of shape [28, 64]",
        "(Worker pid=3) ERROR [multiproc_executor.py:1000] ValueError: Attempted to assign 4 + 6 = 10 multimodal "
        "tokens to 12 placeholders",
        "(EngineCore pid=2) ERROR [core.py:1233] RuntimeError: Worker failed with error 'Attempted to assign'",
        "(APIServer pid=1) ERROR [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
        "encountered an issue. See stack trace (above) for the root cause.",
        "(Worker pid=3) ValueError: later"])
    assert load.root_cause(log) == "ValueError: Attempted to assign 4 + 6 = 10 multimodal tokens to 12 placeholders"
    assert load.root_cause("") == "no exception in the server's log"


def test_uuid_only_resends_equal_alone_or_refused_and_anything_else_is_a_problem():
    alone = Answer(200, golden())
    assert load.resend_outcome(alone, Answer(200, golden())) == "equal alone"
    assert load.resend_outcome(alone, Answer(200, golden(-2.0))) == "another answer"
    assert [load.resend_problem(o) for o in ("equal alone", "400: Cache miss", "another answer", "500: x")] == [
        False, False, True, True]


def test_the_engines_death_is_a_fact_by_exception_type_with_the_workers_frames():
    class DeadSession:
        def log_since(self, offset):
            return "\n".join([
                "(APIServer pid=1) Traceback (most recent call last):",
                '(APIServer pid=1)   File "/x/vllm/entrypoints/openai/serving_chat.py", line 10, in create',
                "(APIServer pid=1) AssertionError: unrelated",
                "(Worker pid=3) ERROR [multiproc_executor.py:1000] Traceback (most recent call last):",
                '(Worker pid=3) ERROR [multiproc_executor.py:1000]   File "/x/vllm/model_executor/models/utils.py", '
                'line 508, in _merge_multimodal_embeddings',
                "(Worker pid=3) ERROR [multiproc_executor.py:1000] ValueError: Attempted to assign 4 = 4 multimodal "
                "tokens to 6 placeholders"])

    measured = load.Measured(problems=["an earlier problem"])
    fact = load.engine_died(DeadSession(), 0, measured, "image B under image A's uuid")
    assert fact == "the engine died (ValueError)"
    assert measured.problems[0] == ("image B under image A's uuid: the engine died: ValueError: Attempted to assign "
                                    "4 = 4 multimodal tokens to 6 placeholders")
    assert [f["function"] for f in measured.frames] == ["_merge_multimodal_embeddings"]


def test_an_example_without_images_does_not_exercise_the_path_and_starts_no_server():
    from vlcheck.configurations.registry import CONFIGURATIONS

    video_only = get_family("llava-next-video").single
    measured = load.measure(get_family("llava-next-video"), video_only, None, CONFIGURATIONS["load"])
    assert measured.not_exercised.startswith("the single example takes no images (it takes video)")
