"""The engine's speed as a client sees it, per family-config: time to the first token of the example's
request with nothing cached, and the decode cost per token after it (`engine/runs.py: engine_speed`),
each over SPEED_ROUNDS rounds with its median and spread, and the machine measured on. Its cell's
facts (`engine.time_to_first_token_and_decode_rate`) are figures for people: nothing decides on them yet,
and they are never compared across machines (docs/speed.md)."""

import pytest

from vlcheck.engine.runs import DECODE_TOKENS, SPEED_ROUNDS, engine_speed

pytestmark = pytest.mark.engine


CPU_BUILD_SKIP = ("timed on GPUs, where users serve: on vLLM's CPU build the 12 requests of new media per "
                  "family-config added about 10 s each to CI's engine tier (2 cores), for figures no one serves on")


def test_time_to_first_token_and_decode_rate(family, variant, engine, request):
    if engine.platform == "cpu":
        pytest.skip(CPU_BUILD_SKIP)
    speed = engine_speed(family, variant, engine)
    facts = speed.facts()
    request.node.user_properties.append(("engine_speed", facts))
    assert len(speed.ttft_s) == len(speed.decode_s_per_token) == SPEED_ROUNDS
    assert all(t > 0 for t in speed.ttft_s), f"{family.name}: {speed.ttft_s}"
    # decoding DECODE_TOKENS more tokens must cost time: a request answered from a cache, or one whose
    # extra tokens were not generated, would time as no slower than its first token
    assert facts["decode_ms_per_token"]["median"] > 0, (
        f"{family.name}: {1 + DECODE_TOKENS} tokens took no longer than 1: {facts}")
