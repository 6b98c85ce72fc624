"""An engine start that lost a port race to an engine starting beside it is tried again; any other
failed start is the family-config's failure at once."""

import pytest

from vlcheck.engine import engines
from vlcheck.spec.registry import get_family

PORT_TAKEN = ("The server socket has failed to listen on any local network address. port: 37337, useIpv6: false, "
              "code: -98, name: EADDRINUSE, message: address already in use")


@pytest.fixture
def fake_vllm(monkeypatch):
    from vlcheck import adapter

    failures: list[str] = []
    starts: list[dict] = []

    class LLM:
        def __init__(self, **args):
            starts.append(args)
            if failures:
                raise RuntimeError(failures.pop(0))

    # vLLM's own module with LLM replaced, not a stand-in module: building the checkpoint imports vLLM's configs
    monkeypatch.setattr("vllm.LLM", LLM)
    monkeypatch.setattr(engines, "platform_unavailable", lambda platform: None)
    monkeypatch.setattr(engines, "gpu_count", lambda: 1)
    monkeypatch.setattr(adapter, "create_processor", lambda local, args: None)
    return failures, starts


def test_a_start_that_lost_a_port_race_is_tried_again(fake_vllm):
    failures, starts = fake_vllm
    failures.append(f"Engine core initialization failed: torch.distributed.DistNetworkError: {PORT_TAKEN}")
    qwen = get_family("qwen2_vl")
    cache = engines.EngineCache()
    assert cache.get(qwen, qwen.single, "seeded", "gpu", dtype="float32") is cache.current
    cache.current = None  # nothing to shut down
    assert len(starts) == 2 and starts[1]["dtype"] == "float32"  # the same engine, not another dtype


def test_a_port_race_every_time_and_other_failures_are_not_hidden(fake_vllm):
    failures, starts = fake_vllm
    qwen = get_family("qwen2_vl")
    failures.extend([PORT_TAKEN] * (engines.PORT_RACE_RETRIES + 1))
    with pytest.raises(engines.EngineUnavailable, match="tries: the first lost a port race"):
        engines.EngineCache().get(qwen, qwen.single, "seeded", "gpu", dtype="float32")
    assert len(starts) == engines.PORT_RACE_RETRIES + 1
    starts.clear()
    failures.append("CUDA out of memory")
    with pytest.raises(engines.EngineUnavailable, match="CUDA out of memory"):
        engines.EngineCache().get(qwen, qwen.single, "seeded", "gpu", dtype="float32")
    assert len(starts) == 1
