"""The loopback media server and the media-fault verdicts, without a vLLM server: each route behaves
as its name says, and each outcome is judged by what the fault leaves to serve."""

import time

import httpx
import pytest

from vlcheck.served import network_faults
from vlcheck.served.client import Reply
from vlcheck.served.media_server import MediaServer, Route
from vlcheck.spec.registry import get_family

BODY = bytes(range(256)) * 4


def _get(server, path, timeout=5.0):
    return httpx.get(server.url(path), timeout=timeout, follow_redirects=True, trust_env=False)


def test_each_route_answers_as_its_name_says():
    routes = {"/file": Route(BODY, "image/png"), "/slow": Route(BODY, "image/png", delay_s=0.3),
              "/moved": Route(b"", "image/png", redirect_to="/file"), "/gone": Route(b"x", "text/plain", status=404),
              "/typed": Route(BODY, "text/html")}
    with MediaServer(routes) as server:
        assert _get(server, "/file").content == BODY
        began = time.monotonic()
        assert _get(server, "/slow").content == BODY and time.monotonic() - began >= 0.3
        moved = _get(server, "/moved")
        assert moved.content == BODY and [r.status_code for r in moved.history] == [302]
        assert _get(server, "/gone").status_code == 404
        assert _get(server, "/typed").headers["content-type"] == "text/html"
        assert _get(server, "/nowhere").status_code == 404
    assert server.hits == {"/file": 2, "/slow": 1, "/moved": 1, "/gone": 1, "/typed": 1, "/nowhere": 1}


def test_a_cut_body_and_a_stall_fail_the_transfer_not_the_server():
    with MediaServer({"/cut": Route(BODY, "image/png", short_by=100), "/stall": Route(BODY, "image/png", stall_s=30),
                      "/file": Route(BODY, "image/png")}) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            _get(server, "/cut")
        began = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            _get(server, "/stall", timeout=0.5)
        assert time.monotonic() - began < 5
        assert _get(server, "/file").content == BODY  # the stalled answer holds no other
    # leaving the server ends the stalled answer at once, not after its 30 s


def _reply(status, tokens=(1, 2, 3), hashes=("h",)):
    return Reply(status, {"token_ids": list(tokens), "features": {"mm_hashes": {"image": list(hashes)}}}
                 if status == 200 else {"error": {"message": "bad media"}}, 0.1)


def _judge(fault_name, reply, fetches=1):
    fault = next(f for f in network_faults.FAULTS if f.name.startswith(fault_name))
    return network_faults.judge(fault, reply, network_faults.fingerprint(_reply(200)), fetches, ("0.99.0", "5.99.0"))


def test_a_fault_passes_with_the_right_answer_or_a_4xx_where_nothing_can_be_served():
    assert not _judge("redirect", _reply(200)).failure
    assert "another answer" in _judge("redirect", _reply(200, hashes=("other",))).failure  # other pixels
    assert "another answer" in _judge("slow origin", _reply(200, tokens=(1, 2))).failure
    assert "the file was there to serve" in _judge("redirect", _reply(422)).failure
    assert not _judge("wrong content type", _reply(415)).failure  # either is right there
    assert not _judge("wrong content type", _reply(200)).failure
    assert not _judge("not found", _reply(422)).failure
    assert "no whole file to serve" in _judge("body cut short", _reply(200)).failure


def test_a_5xx_fails_outside_the_versions_it_is_declared_for_and_no_answer_always():
    outside = _judge("not found", _reply(500))
    assert "must get a 4xx or the right answer" in outside.failure
    fault = next(f for f in network_faults.FAULTS if f.name.startswith("not found"))
    inside = network_faults.judge(fault, _reply(500), None, 1, ("0.24.0", "5.16.1"))
    assert not inside.failure and "known on vllm ==0.24.0" in inside.summary
    assert "no answer" in _judge("slow origin", Reply(None, None, 60.0, "no answer within 60 s")).failure


def test_run_faults_names_a_case_vllm_never_fetched_and_resends_the_data_url_after_a_wrong_one():
    variant = get_family("llava").single  # images only
    sent = []

    def send(url, modality, timeout_s):
        sent.append(url[:5])
        return _reply(200) if url.startswith("data:") else _reply(400)  # rejects every http URL without fetching

    outcomes = network_faults.run_faults(send, variant)
    assert [o.case.split(":")[0] for o in outcomes] == ["image"] * len(network_faults.FAULTS)
    served_as_is = outcomes[0]
    assert served_as_is.fetches == 0 and "the file was there to serve" in served_as_is.failure
    not_found = next(o for o in outcomes if "not found" in o.case)
    assert not_found.failure == "vLLM never fetched the file: the case proves nothing"
    assert sent.count("data:") == 1 + len(network_faults.FAULTS)  # the control, then one after each non-right answer


def test_a_container_served_otherwise_over_http_or_offline_fails_naming_it():
    from vlcheck.core import video_containers
    from vlcheck.served.containers import run_containers

    try:
        names = [c.name for c in video_containers.containers()]
    except video_containers.ContainersUnavailable as err:
        pytest.skip(f"the container files cannot be written here: {err}")

    def video_reply(length, hashes=("h",)):
        return Reply(200, {"token_ids": [7] * length, "features": {"mm_hashes": {"video": list(hashes)},
                                                                     "mm_placeholders": {"video": [{"offset": 0, "length": length}]}}}, 0.1)

    def send(url, modality, timeout_s):  # vfr decodes otherwise when fetched; every data URL renders 40 tokens
        if url.startswith("http") and url.endswith("/vfr"):
            httpx.get(url, trust_env=False)  # fetched, as vLLM would
            return video_reply(40, ("other",))
        if url.startswith("http"):
            httpx.get(url, trust_env=False)
        return video_reply(40)

    outcomes = {o.container: o for o in run_containers(send, lambda data: [40])}
    assert sorted(outcomes) == sorted(names)
    assert outcomes["vfr"].failure == "the file over http renders otherwise than as a data URL"
    assert not outcomes["mp4_h264"].failure and "fetched 1x" in outcomes["mp4_h264"].summary
    offline_differs = {o.container: o for o in run_containers(send, lambda data: [30])}
    assert offline_differs["webm_vp9"].failure == "served placeholder lengths [40], offline [30] for the same bytes"


def test_the_over_long_request_fits_the_context_as_text_and_not_with_its_media():
    # a prompt too long as text alone is rejected before its media is processed: its item never enters the cache
    from vlcheck.served import cache_desync

    def count(messages):  # 3 tokens a word (a synthetic tokenizer), 20 for the question and template, 66 per image
        content = messages[0]["content"]
        text = next(p["text"] for p in content if p["type"] == "text")
        media = sum(1 for p in content if p["type"] != "text")
        return 20 + 3 * text.count(cache_desync.WORD) + 66 * media

    text = cache_desync.padded_text(count, {"type": "image_url", "image_url": {"url": "data:"}}, "What is it?", 4096)
    alone = count([{"role": "user", "content": [{"type": "text", "text": text}]}])
    assert alone < 4096 < alone + 66
    with pytest.raises(cache_desync.NotArranged):  # a server that counts no media tokens
        cache_desync.padded_text(lambda messages: 20, {"type": "image_url"}, "What is it?", 4096)
