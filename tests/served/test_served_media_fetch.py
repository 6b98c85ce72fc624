"""An unreachable http media URL as a user's server fetches it: with vLLM's own retry policy
(VLLM_MEDIA_FETCH_MAX_RETRIES, 3 by default, with 1 s and 4 s of backoff). The per-family
bad-request tables send the same URL with retries off (vlcheck/served/render.py NO_FETCH_RETRIES):
vLLM's media connector answers it before any family's processor does, so the retries would cost
every family-config the same seconds. Here, once per run: the retries change how long the answer
takes, not the answer, and the server still answers within a bound (no hang)."""

import time

import pytest

from vlcheck.runners.pytest_plugin import selected_families
from vlcheck.served import bad_requests, render
from vlcheck.served.client import Client
from vlcheck.spec.registry import all_families

ANSWER_WITHIN_S = 30.0
"""vLLM 0.24.0-0.32.0 answer after about 5 s (three attempts); a server that waits for its client's
timeout instead is a hang."""


def _first_servable(config):
    loaded = all_families()
    for name in selected_families(config):
        for variant in loaded[name].variants if name in loaded else ():
            if "image" not in variant.modalities:
                continue
            try:
                return (loaded[name], variant, *render.start(loaded[name], variant, env={}))
            except render.NotServable:
                continue
    pytest.skip("no selected family-config that takes images can be served here (chat templates not cached)")


def test_unreachable_media_url_with_vllms_own_retries(pytestconfig):
    spec, variant, server, line = _first_servable(pytestconfig)
    case = next(c for c in bad_requests.CASES if c.name.startswith("http URL"))
    try:
        server.wait_ready()
        client = Client(server.url)
        modality, count = render.shapes(variant)[0]
        messages = render.chat_messages(variant, modality, render.default_questions(variant, modality)[0], count)
        valid = render.rendered(client, render.shape_name(modality, count), client.render_chat(messages))
        began = time.monotonic()
        [outcome] = bad_requests.run_cases(client, spec, variant, valid, line.limits(), cases=[case])
        took = time.monotonic() - began
    finally:
        server.stop()
    assert not outcome.failure, f"{spec.name} [{variant.kind}] {case.name}: {outcome.failure} ({outcome.summary})"
    assert took < ANSWER_WITHIN_S, f"{spec.name} [{variant.kind}] {case.name}: answered after {took:.0f} s"
    record = render.served_record(spec, variant)  # the family's table: the same URL with retries off
    without_retries = next(o for o in record.bad_requests if o.case == case.name)
    assert outcome.line == without_retries.line, (
        f"{spec.name} [{variant.kind}] {case.name}: vLLM's retries changed the answer, not only its latency:\n"
        f"  with retries: {outcome.line}\n  without:      {without_retries.line}")
