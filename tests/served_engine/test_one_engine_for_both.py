"""The family-config's own engine serves the offline and the served checks alike
(`vlcheck/engine/shared_server.py`): which engines are shared, how the served checks find the
server, and the command line it is built from. The engine itself runs in the engine tiers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from vlcheck.engine import engines
from vlcheck.engine.shared_server import command_line
from vlcheck.spec.registry import get_family


def _started(monkeypatch, shares: bool):
    """An EngineCache whose engines only record how they were made."""
    from vlcheck import adapter
    from vlcheck.adapter import shared_engine

    made = []

    class LLM:
        def __init__(self, **args):
            made.append("LLM")

    def shared(spec, variant, args, local, watchdog):
        made.append("shared")
        return SimpleNamespace(server=SimpleNamespace(url="http://127.0.0.1:1"))

    monkeypatch.setattr("vllm.LLM", LLM)  # not a stand-in module: building the checkpoint imports vLLM's configs
    monkeypatch.setattr(engines, "platform_unavailable", lambda platform: None)
    monkeypatch.setattr(engines, "gpu_count", lambda: 2)
    monkeypatch.setattr(engines, "_shared_engine", shared)
    monkeypatch.setattr(adapter, "create_processor", lambda local, args: None)
    monkeypatch.setattr(adapter, "prepare_cpu_engine", lambda: None)
    monkeypatch.setattr(shared_engine, "available", lambda: None)
    return engines.EngineCache(shares_server=lambda spec, variant: shares), made


@pytest.mark.parametrize("platform", ["gpu", "cpu"])
def test_the_selected_family_configs_own_engine_serves_the_served_checks_too(monkeypatch, platform):
    # On one H100 the served checks as a second engine per family-config did not fit 10 minutes
    # (226-376 s per served family-config against 65-200 s): the engine the offline checks start serves them
    cache, made = _started(monkeypatch, shares=True)
    qwen = get_family("qwen2_vl")
    handle = cache.get(qwen, qwen.single, "seeded", platform, dtype="float32")
    assert made == ["shared"] and handle.server is not None
    assert not handle.core_in_process and handle.runs_alone  # its core runs apart: goldens alone
    cache.current = None
    others = [{"mm_processor_cache_gb": 0}, {"in_process_core": True}] + ([{"tensor_parallel_size": 2}] if platform == "gpu" else [])
    for overrides in others:
        made.clear()
        handle = cache.get(qwen, qwen.single, "seeded", platform, **overrides)
        assert made == ["LLM"] and handle.server is None, overrides  # another engine than the family-config's own
        cache.current = None


def test_an_unselected_family_config_keeps_its_llm(monkeypatch):
    cache, made = _started(monkeypatch, shares=False)
    qwen = get_family("qwen2_vl")
    handle = cache.get(qwen, qwen.single, "seeded", "gpu", dtype="float32")
    assert made == ["LLM"] and handle.server is None and handle.runs_alone  # a GPU's LLM: core apart too
    cache.current = None
    handle = cache.get(qwen, qwen.single, "seeded", "cpu", dtype="float32")
    assert not handle.runs_alone  # vLLM's CPU build: the core steps in this process, batches as given
    cache.current = None


def test_without_offline_rendering_for_an_async_engine_the_served_checks_get_their_own_server(monkeypatch):
    from vlcheck.adapter import shared_engine

    cache, made = _started(monkeypatch, shares=True)
    monkeypatch.setattr(shared_engine, "available", lambda: "vlcheck's adapter knows no generation of it")
    qwen = get_family("qwen2_vl")
    assert cache.get(qwen, qwen.single, "seeded", "gpu", dtype="float32").server is None and made == ["LLM"]
    cache.current = None


def test_the_shared_engine_is_built_from_the_vllm_serve_line_the_separate_server_ran():
    from vlcheck.engine.engine_server import command, flags

    args = {"model": "/m", "max_model_len": 4096, "enforce_eager": True, "limit_mm_per_prompt": {"image": 1},
            "disable_log_stats": False}
    line = command_line(args, 8123, Path("/t/chat_template.jinja"))
    assert line[:3] == ["vllm", "serve", "/m"] and line[-2:] == ["--chat-template", "/t/chat_template.jinja"]
    separate = command("gpu", args, 8123, Path("/t/chat_template.jinja"))
    assert line[3:] == separate[separate.index("/m") + 1:]  # the same flags, host, port and served name
    assert flags(args) == ["--max-model-len", "4096", "--enforce-eager", "--limit-mm-per-prompt", '{"image": 1}']


def test_the_served_checks_take_the_shared_server_only_where_it_has_their_args():
    from vlcheck.runners.pytest_plugin import _shared_server_serves

    def engine(prefix_caching):
        config = SimpleNamespace(cache_config=SimpleNamespace(enable_prefix_caching=prefix_caching))
        return SimpleNamespace(llm=SimpleNamespace(vllm_config=config))

    assert _shared_server_serves(engine(True), {})
    assert _shared_server_serves(engine(True), {"enable_prefix_caching": True})
    assert not _shared_server_serves(engine(False), {"enable_prefix_caching": True})
    assert not _shared_server_serves(engine(True), {"mm_processor_cache_gb": 0.001})  # the small-cache check's own


def test_a_family_config_not_chosen_to_serve_skips_its_served_checks_before_its_engine_is_asked_for(run_engine_tests):
    """Through the installed plugin, where no engine can start (this environment has no vLLM CPU build):
    the served checks of a family-config --vlcheck-serve does not select say so, not why the engine is
    missing, so that an engine that does not start on one end of a diff leaves the same skips as on the other."""
    ran, reasons = run_engine_tests("test_engine_served.py", "--vlcheck-family", "qwen2_vl", "--vlcheck-variant", "single",
                                    "--vlcheck-serve", "llava-single")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert len(reasons) >= 10, reasons
    assert all("--vlcheck-serve qwen2_vl-single (or qwen2_vl, or all)" in why for why in reasons.values()), reasons
