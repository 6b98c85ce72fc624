"""Files two installed distributions both install: found from their RECORDs, the copy on disk named."""

import base64
import hashlib
from importlib import metadata

from vlcheck.core import file_clashes as clashes_module
from vlcheck.core.file_clashes import file_clashes
from vlcheck.gate import report
from vlcheck.gate.diff import Diff, file_clash_lines


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install(site, name, version, files):
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"{path},{record_hash(data)},{len(data)}" for path, data in files.items()]
    (info / "RECORD").write_text("\n".join(lines + [f"{info.name}/RECORD,,"]) + "\n")
    for path, data in files.items():  # installed in this order: the last one's copy stays
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)


def test_the_same_file_from_two_distributions_is_named_with_the_copy_on_disk(tmp_path):
    # vLLM 0.33.0's environment: cuda-python 12.6.2.post1 and cuda-bindings 13.5.0 both install cuda/bindings/runtime*.so
    runtime = "cuda/bindings/runtime.cpython-311-x86_64-linux-gnu.so"
    install(tmp_path, "cuda-bindings", "13.5.0", {runtime: b"13.5", "cuda/bindings/driver.so": b"same",
                                                 "cuda/bindings/only13.py": b"x"})
    install(tmp_path, "cuda-python", "12.6.2.post1", {runtime: b"12.6", "cuda/bindings/driver.so": b"same"})
    install(tmp_path, "unrelated", "1.0", {"unrelated/__init__.py": b""})
    clashes = file_clashes(metadata.distributions(path=[str(tmp_path)]))
    assert len(clashes) == 1  # a file with the same contents in both is no clash
    clash = clashes[0]
    assert clash.claimants == ("cuda-bindings 13.5.0", "cuda-python 12.6.2.post1")
    assert clash.paths == (runtime,) and clash.present == ("cuda-python 12.6.2.post1",)
    assert "on disk: cuda-python 12.6.2.post1's" in clash.line()


def test_the_diff_names_each_ends_clashes_and_an_old_report_has_none():
    d = Diff({"vllm": "0.24.0"}, {"vllm": "0.33.0", "file_clashes": ["a 1 and b 2 install 1 of the same file(s)"]})
    assert file_clash_lines(d) == ["candidate environment: a 1 and b 2 install 1 of the same file(s)"]


def test_a_process_reads_its_distributions_once_however_many_reports_it_builds(monkeypatch):
    read = []

    def counting(distributions=None):
        read.append(distributions)
        return [clashes_module.FileClash(("a 1", "b 2"), 1, ("x.so",), ("b 2",))]

    monkeypatch.setattr(clashes_module, "file_clashes", counting)
    clashes_module.installed_file_clashes.cache_clear()
    try:
        environments = [report.environment(adapter_description={}) for _ in range(3)]
    finally:
        clashes_module.installed_file_clashes.cache_clear()  # the next caller reads the real ones
    assert len(read) == 1
    assert all(env["file_clashes"] == [environments[0]["file_clashes"][0]] for env in environments)
    assert environments[0]["file_clashes"][0].startswith("a 1 and b 2 install 1 of the same file(s)")
