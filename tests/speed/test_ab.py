"""`vlcheck speed ab`'s driver on stand-in workers (the rounds' order, what it compares, what it
names), and one real worker of this environment answering over its JSON-lines protocol."""

import io
import json

import pytest

from vlcheck.speed import ab


class FakeWorker:
    asked: list[str] = []

    def __init__(self, label, env, served=False):
        self.label = label
        self.hello = {"versions": {"vllm": "x", "transformers": "y"}, "machine": {"cpu": "c", "cores": 2, "gpu": None},
                      "code": {"vllm": "d1"}}

    def ask(self, family, variant, repeats):
        FakeWorker.asked.append(self.label)
        slow = 1.3 if (self.label == "candidate" and family == "slowfam") else 1.0
        wobble = 1 + 0.01 * (len(FakeWorker.asked) % 3)
        if family == "broken":
            return {"family": family, "variant": variant, "skip": "vLLM's processor fails on the example"}
        return {"family": family, "variant": variant,
                "timings": {"processor": [0.01 * slow * wobble] * repeats, "processor_cached": [0.002 * wobble] * repeats}}

    def close(self):
        pass


def test_rounds_alternate_abba_and_only_the_slowed_family_is_named(monkeypatch, tmp_path):
    FakeWorker.asked = []
    monkeypatch.setattr(ab, "Worker", FakeWorker)
    report = ab.run(tmp_path, tmp_path, [("slowfam", "single"), ("fine", "single"), ("broken", "single")],
                    sessions=4, rounds=2, repeats=3, progress=lambda line: None)
    # ABBA within a session, and the next session starts with the other side
    assert FakeWorker.asked[:8] == ["baseline", "candidate"] * 3 + ["candidate", "baseline"]
    assert FakeWorker.asked[12:14] == ["candidate", "baseline"]
    assert report["same_machine"]
    assert ab.slower(report) == [f"slowfam-single: processor x1.3 (beyond x{report['family_configs'][0]['comparisons'][0]['threshold']})"]
    verdicts = {r["family"]: r["verdict"] for r in report["family_configs"]}
    assert verdicts == {"slowfam": "SLOWER", "fine": "same", "broken": "skip"}
    assert report["family_configs"][2]["skip"]["baseline"].startswith("vLLM's processor fails")


def test_a_missing_environment_is_named(tmp_path):
    with pytest.raises(ab.WorkerFailed, match="no bin/python"):
        ab.python_of(tmp_path / "nowhere")


def test_the_worker_times_a_family_config_and_skips_an_unknown_one():
    pytest.importorskip("vllm")
    from vlcheck.prompt.templates import TemplateUnavailable, resolve
    from vlcheck.spec.registry import get_family
    from vlcheck.speed.measure import METRICS
    from vlcheck.speed.worker import serve

    asks = [{"family": "qwen2_vl", "variant": "single", "repeats": 2},
            {"family": "no_such_family", "variant": "single", "repeats": 2}]
    out = io.StringIO()
    assert serve(io.StringIO("".join(json.dumps(a) + "\n" for a in asks)), out, served=True) == 0
    hello, timed, skipped = (json.loads(line) for line in out.getvalue().splitlines())
    assert hello["versions"]["vllm"] and hello["machine"]["cores"] > 0
    # every metric is timed or said not to be; the two renders need the model's chat template
    # (a new user's empty HF cache has none: then they say so, and the processor timings stand)
    assert set(timed["timings"]) | set(timed["not_timed"]) == set(METRICS)
    assert {"processor", "processor_cached", "video_decode"} <= set(timed["timings"])
    qwen2_vl = get_family("qwen2_vl").single
    try:
        resolve(qwen2_vl)
    except TemplateUnavailable:
        assert all("no chat template" in timed["not_timed"][m] for m in ("chat_render", "render")), timed["not_timed"]
    else:  # the render server answered the example's chat request (200), every call
        assert {"chat_render", "render"} <= set(timed["timings"]), timed["not_timed"]
    assert all(len(s) == 2 and all(x > 0 for x in s) for s in timed["timings"].values())
    assert "no such family-config" in skipped["skip"]


def test_the_page_draws_each_comparison_with_its_band(monkeypatch, tmp_path):
    from vlcheck.speed import page

    monkeypatch.setattr(ab, "Worker", FakeWorker)
    report = ab.run(tmp_path, tmp_path, [("slowfam", "single")], sessions=3, rounds=1, repeats=2,
                    progress=lambda line: None)
    html = page.render(report)
    assert html.count("<circle") == 2 and "slowfam-single processor" in html and "SLOWER" in html
    assert "3 sessions of 1 rounds" in html


def test_an_unknown_family_is_bad_input(tmp_path, capsys):
    from vlcheck.cli import main as cli

    assert cli.main(["speed", "ab", str(tmp_path), str(tmp_path), "--family", "no_such_family"]) == 2
    assert "no_such_family" in capsys.readouterr().err


def test_without_served_no_render_server_is_started(monkeypatch):
    pytest.importorskip("vllm")
    from vlcheck.speed import measure
    from vlcheck.spec.registry import get_family

    def no_server(*args):
        raise AssertionError("a render server was started without --served")

    monkeypatch.setattr(measure, "_render", no_server)
    qwen2_vl = get_family("qwen2_vl")
    prepared = measure.prepare(qwen2_vl, qwen2_vl.single)
    assert "render" not in prepared.calls and "render" not in prepared.not_timed
