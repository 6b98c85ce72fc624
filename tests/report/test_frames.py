"""Every failure caused by an exception carries where it was raised: its innermost frames
(package, file, line, function), innermost last, in the result, the report cell and each
family-config's unit; never in the reason or the finding, which `vlcheck diff` compares by text
(a line number there would read as "moved" on every release).

The libraries are planted: modules named `transformers.fake_module`, `vllm.fake_wrapper`,
`torch.fake_ops`, executed from files under a `site-packages` folder, as the installed ones lie."""

from __future__ import annotations

import html
import json
import types
from pathlib import Path

import pytest

from vlcheck.core.results import (MAX_FRAMES, CheckResult, Status, combine, crashed, declared_deviation, frames_in_text,
                                  frames_of, frames_text, from_exception, raised_by)
from vlcheck.gate import diff, report
from vlcheck.gate.checks import unit
from vlcheck.spec.schema import Declaration

TRANSFORMERS = '''
def reshape(x):
    return x.view(-1, 14, 64)


def explode(message):
    raise RuntimeError(message)


def a():
    return b()


def b():
    return c()


def c():
    return d()


def d():
    raise KeyError("deep")


def forward(ops):
    return ops.f1()


class Processor:
    def __call__(self, message):
        return explode(message)
'''

VLLM = '''
def apply(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:
        raise ValueError(f"Failed to apply {fn.__name__}") from exc


def apply_hiding(fn, *args):
    try:
        return fn(*args)
    except Exception:
        raise ValueError("rejected") from None


def call(fn, *args):
    return fn(*args)
'''

TORCH = '''
def f1():
    return f2()


def f2():
    return f3()


def f3():
    return f4()


def f4():
    raise IndexError("index 3 is out of bounds")
'''


def plant(root: Path, name: str, source: str) -> types.ModuleType:
    """Module `name` executed from `root/site-packages/<its path>.py`: a library's frames, as installed."""
    path = root / "site-packages" / (name.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture
def libs(tmp_path):
    return types.SimpleNamespace(transformers=plant(tmp_path, "transformers.fake_module", TRANSFORMERS),
                                 vllm=plant(tmp_path, "vllm.fake_wrapper", VLLM),
                                 torch=plant(tmp_path, "torch.fake_ops", TORCH))


def caught(fn, *args) -> BaseException:
    with pytest.raises(BaseException) as info:
        fn(*args)
    return info.value


def test_frames_name_the_package_file_line_and_function(libs):
    err = caught(libs.transformers.explode, "shape '[-1, 14, 64]' is invalid for input of size 88128")
    assert raised_by(err) == "transformers"
    frames = frames_of(err)
    assert frames[-1] == {"package": "transformers", "file": "transformers/fake_module.py",
                          "line": line_of(TRANSFORMERS, "raise RuntimeError(message)"), "function": "explode"}
    # the caller: this test, named relative to the checkout (no machine's folders)
    assert frames[-2]["file"] == "tests/report/test_frames.py" and frames[-2]["package"] == "tests"
    assert all(set(f) == {"package", "file", "line", "function"} and isinstance(f["line"], int) for f in frames)
    assert len(frames) <= MAX_FRAMES + 1


def test_an_error_raised_by_torchs_c_code_points_at_the_line_that_called_it(libs):
    torch = pytest.importorskip("torch")
    err = caught(libs.transformers.reshape, torch.zeros(88128 // 64 + 1))
    assert raised_by(err) == "transformers"
    assert frames_of(err)[-1] == {"package": "transformers", "file": "transformers/fake_module.py",
                                  "line": line_of(TRANSFORMERS, "x.view(-1, 14, 64)"), "function": "reshape"}


def test_the_innermost_three_frames_plus_the_owning_librarys_last(libs):
    deep = frames_of(caught(libs.vllm.call, libs.transformers.a))
    assert [f["function"] for f in deep] == ["b", "c", "d"]  # the owner's last frame (d) is among them
    # torch's own frames, innermost; transformers (the owner: it called torch) last in control above them
    err = caught(libs.transformers.forward, libs.torch)
    assert raised_by(err) == "transformers"
    frames = frames_of(err)
    assert [(f["package"], f["function"]) for f in frames] == [
        ("transformers", "forward"), ("torch", "f2"), ("torch", "f3"), ("torch", "f4")]
    assert frames[0]["line"] == line_of(TRANSFORMERS, "return ops.f1()")
    assert frames[-1]["file"] == "torch/fake_ops.py"


def test_a_wrapped_exception_is_followed_to_where_it_went_wrong(libs):
    """vLLM's 'Failed to apply <processor>' wraps the processor's exception, raised in vLLM's own
    frame: the frames go on into the wrapped one; whose it is stays decided on the raised one."""
    processor = libs.transformers.Processor()
    err = caught(libs.vllm.apply, processor, "bad image")
    assert raised_by(err) == "vllm"
    frames = frames_of(err)
    assert [(f["package"], f["function"]) for f in frames] == [
        ("vllm", "apply"), ("transformers", "Processor.__call__"), ("transformers", "explode")]
    assert frames[0]["line"] == line_of(VLLM, "return fn(*args)")  # where vLLM called it, not where it re-raised
    # `raise ... from None`: the library set the cause aside; the frames end where it raised
    hidden = frames_of(caught(libs.vllm.apply_hiding, processor, "bad image"))
    assert hidden[-1]["package"] == "vllm" and hidden[-1]["line"] == line_of(VLLM, 'raise ValueError("rejected")')


def test_from_exception_and_crashed_carry_frames_and_the_text_stays_as_it_was(libs):
    message = "shape '[-1, 14, 64]' is invalid for input of size 88128"
    err = caught(libs.transformers.explode, message)
    result = from_exception("smolvlm", "reference", err, "[single]")
    assert result.status is Status.FAIL and result.frames == frames_of(err) and result.frames
    assert result.reason == f"[single] transformers raised RuntimeError: {message}"
    line = str(result.frames[-1]["line"])
    assert line not in result.reason.replace(message, "") and ".py" not in result.reason
    assert not any(str(f["line"]) in json.dumps(result.data) for f in result.frames)
    ours = caught(lambda: types.SimpleNamespace().missing)
    crash = crashed("smolvlm", "reference", ours, "[single]")
    assert crash.status is Status.ERROR and crash.frames[-1]["file"] == "tests/report/test_frames.py"
    assert crash.frames[-1]["function"].endswith("<lambda>") and ".py" not in crash.reason


def test_combine_and_declarations_keep_the_frames(libs):
    err = caught(libs.transformers.explode, "bad")
    single, multi = (from_exception("phi3_v", "processor", err, f"[{k}]") for k in ("single", "multi_image"))
    passed = CheckResult("phi3_v", "processor", Status.PASS, "[single] fine")
    cell = combine("phi3_v", "processor", [single, multi, passed])
    assert cell.status is Status.FAIL and cell.frames == single.frames  # the same frames once
    assert combine("phi3_v", "processor", [passed]).frames == []
    declared = Declaration("known", vllm=">=0", transformers=">=0")
    variant = types.SimpleNamespace(kind="single", deviations={"processor": declared},
                                    deviation=lambda key: declared if key == "processor" else None)
    deviation = declared_deviation(single, variant)
    assert deviation.status is Status.DEVIATION and deviation.frames == single.frames


def _report(results: list[CheckResult]) -> dict:
    spec = types.SimpleNamespace(title="SmolVLM", model="HuggingFaceTB/SmolVLM-256M-Instruct")
    return report.build(results, ["reference"], {"smolvlm": spec})


def test_the_report_cell_and_each_family_config_carry_the_frames(libs):
    err = caught(libs.transformers.explode, "shape '[-1, 14, 64]' is invalid for input of size 88128")
    failed = from_exception("smolvlm", "reference", err, "[single]")
    passed = CheckResult("smolvlm", "reference", Status.PASS, "[multi_image] 1 request(s)")
    assert unit(failed)["frames"] == failed.frames and "frames" not in unit(passed)
    cell = combine("smolvlm", "reference", [failed, passed])
    cell.variants = {"single": unit(failed), "multi_image": unit(passed)}
    rep = json.loads(json.dumps(_report([cell])))
    written = rep["families"]["smolvlm"]["checks"]["reference"]
    assert written["frames"] == failed.frames
    assert written["variants"]["single"]["frames"] == failed.frames and "frames" not in written["variants"]["multi_image"]
    assert "frames" not in _report([passed])["families"]["smolvlm"]["checks"]["reference"]
    assert f"raised at: {html.escape(frames_text(failed.frames))}" in report.to_html(rep)  # the page's detail
    diff.validate(rep)  # a reader of schema 3 takes the new key


def test_frames_are_never_compared_a_moved_line_is_no_change(libs):
    err = caught(libs.transformers.explode, "bad")
    old_result = from_exception("smolvlm", "reference", err, "[single]")
    new_result = from_exception("smolvlm", "reference", err, "[single]")
    new_result.frames = [{**f, "line": f["line"] + 40} for f in new_result.frames]  # the next release
    old, new = (json.loads(json.dumps(_report([r]))) for r in (old_result, new_result))
    for rep, r in ((old, old_result), (new, new_result)):
        rep["families"]["smolvlm"]["checks"]["reference"]["variants"] = {"single": unit(r)}
    d = diff.compare(old, new)
    assert not d.moved and not d.regressions and not d.lost_coverage, diff.to_text(d)


def test_frames_are_read_from_another_processs_log():
    """A server's or an engine's log: the last chain's root traceback, past vLLM's closing
    'See root cause above', through log prefixes."""
    log = '''INFO 01-01 starting
(EngineCore pid=7) ERROR 01-01 [core.py:9] Traceback (most recent call last):
(EngineCore pid=7) ERROR 01-01 [core.py:9]   File "/x/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 700, in run_engine_core
(EngineCore pid=7) ERROR 01-01 [core.py:9]     engine_core = EngineCoreProc(*args, **kwargs)
(EngineCore pid=7) ERROR 01-01 [core.py:9]   File "/x/lib/python3.11/site-packages/transformers/models/phi3_v/modeling.py", line 12, in forward
(EngineCore pid=7) ERROR 01-01 [core.py:9] ValueError: bad shape
Traceback (most recent call last):
  File "/x/lib/python3.11/site-packages/vllm/inner.py", line 3, in wrapped
KeyError: 'x'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/lib/python3.11/site-packages/vllm/entrypoints/cli/main.py", line 50, in main
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
'''
    assert frames_in_text(log) == [
        {"package": "vllm", "file": "vllm/v1/engine/core.py", "line": 700, "function": "run_engine_core"},
        {"package": "transformers", "file": "transformers/models/phi3_v/modeling.py", "line": 12, "function": "forward"}]
    assert frames_in_text(log.split("ValueError: bad shape")[1]) == [
        {"package": "vllm", "file": "vllm/inner.py", "line": 3, "function": "wrapped"}]  # a chain's root: printed first
    assert frames_in_text("no traceback here") == []


def test_a_server_that_did_not_start_carries_its_logs_frames(tmp_path):
    from vlcheck.served.server import ServerFailed

    log = tmp_path / "server.log"
    log.write_text('Traceback (most recent call last):\n  File "/v/lib/python3.11/site-packages/vllm/config/model.py", '
                   'line 88, in __post_init__\nValueError: no such architecture\n')
    failed = ServerFailed("the server exited before it was ready; its log ...", log)
    assert failed.frames == [{"package": "vllm", "file": "vllm/config/model.py", "line": 88, "function": "__post_init__"}]
    assert failed.cause == "ValueError: no such architecture"  # what a cell's reason shows, not the command line
    assert ServerFailed("no log").frames == [] and ServerFailed("no log").cause == ""


def test_a_hostile_case_broken_in_the_guarded_child_carries_its_frames(libs):
    """The guarded child's traceback stays in the child: it sends the frames with the error."""
    from vlcheck.hostile.guard import ChildError, guarded_calls
    from vlcheck.hostile.inputs import Outcome, error_outcome

    [(_, error)] = guarded_calls([lambda: libs.vllm.call(libs.transformers.a)], 30, 2)
    assert isinstance(error, ChildError) and error.owner == "transformers"
    assert [f["function"] for f in error.frames] == ["b", "c", "d"]
    outcome = error_outcome("CMYK image", error)
    assert outcome.kind == "broken" and outcome.frames == error.frames
    assert outcome.line() == "CMYK image: broken: KeyError: 'deep'"  # the snapshot's line, unchanged
    assert outcome == Outcome("CMYK image", "broken", "KeyError: 'deep'")  # frames are no part of the outcome


def test_a_check_that_builds_its_failure_by_hand_carries_the_exceptions_frames():
    """The processor check words vLLM's rejection itself ('image item 0: the prompt has 0
    placeholder(s)'): the frames are still the exception's, in vLLM's code, and the text is as it was."""
    from vlcheck.gate.checks import CATALOGUE, run_cell
    from vlcheck.spec.registry import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "fixtures" / "specs" / "qwen2_vl_no_placeholder.toml")
    result = run_cell(CATALOGUE["processor"], spec)
    assert result.status is Status.FAIL and "image item 0: the prompt has 0 placeholder(s)" in result.reason
    assert result.frames and result.frames[-1]["package"] == "vllm", result.frames
    assert result.frames[-1]["file"].startswith("vllm/") and result.frames[-1]["file"].endswith(".py")
    assert all(unit_["frames"] for unit_ in result.variants.values() if unit_["status"] == "fail")
    assert not any(f"{f['file']}:{f['line']}" in result.reason + result.finding for f in result.frames)
