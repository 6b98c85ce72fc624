"""vlcheck's pytest plugin (vlcheck/runners/pytest_plugin.py), run in a child pytest: a spec that does not load fails
its own family's tests only, with the loader's message; a crash of vlcheck's own code counts as an
error, apart from the failures that describe vLLM's behaviour."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "specs"

PROBE = '''
from vlcheck.core.results import SuiteError


def test_family_runs(family):
    assert family.name


def test_suite_error():
    raise SuiteError("the adapter knows no processor API of this vLLM")


def test_crash_inside_vlcheck():
    from vlcheck.runners.testing import headline

    headline(None, None)


def test_crash_after_a_line_naming_an_error():
    expected = "a ValueError is what vLLM would raise"  # the summary quotes the crash, not this line
    from vlcheck.runners.testing import headline

    headline(expected, None)


def test_behaviour_failure():
    assert 1 == 2, "vLLM changed"
'''


def test_unloadable_spec_and_suite_errors_are_told_apart(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    # the fixture without its `implicit = true`: a prompt without {placeholder} is a spec error
    (specs / "qwen2_vl_no_placeholder.toml").write_text((FIXTURES / "qwen2_vl_no_placeholder.toml").read_text()
                                                        .replace("implicit = true", ""))
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "VLCHECK_SPEC_PATH": str(specs), "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-rA",
                          str(tmp_path / "test_probe.py"), "--vlcheck-family", "llava",
                          "--vlcheck-family", "qwen2_vl_no_placeholder", "-o", "addopts="],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert re.search(r"PASSED .*test_family_runs\[llava\]", out), out
    assert re.search(r"FAILED .*test_family_runs\[qwen2_vl_no_placeholder\]", out), out
    assert re.search(r"qwen2_vl_no_placeholder: the spec does not load: .*qwen2_vl_no_placeholder.toml: "
                     r"single.modalities.image.placeholder: missing placeholder", out), out
    assert re.search(r"FAILED .*test_behaviour_failure", out), out
    for name in ("test_suite_error", "test_crash_inside_vlcheck", "test_crash_after_a_line_naming_an_error"):
        assert re.search(rf"VLCHECK ERROR .*{name}", out), out
    summary = out.split("vlcheck errors: the suite's own code crashed (not a vLLM finding)")[1]
    assert re.search(r"test_crash_after_a_line_naming_an_error: AttributeError: ", summary), summary
    assert re.search(r"test_suite_error: .*SuiteError: the adapter knows no processor API", summary), summary
    assert re.search(r"2 failed, 1 passed, 3 errors", out), out
