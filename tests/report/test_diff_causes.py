"""`vlcheck diff` groups the cells that decide its verdict into causes, and writes them for a
machine (--json), a browser (--html) and a CI policy (--fail-on)."""

import json

import pytest

from vlcheck.cli import main as cli
from vlcheck.gate.causes import Cell, group, key_of
from vlcheck.gate.report import SCHEMA

CHECKS = ["architecture", "engine_args", "processor", "served", "reference"]
FAMILIES = ("alpha", "beta", "gamma", "delta")


def report(vllm, cells=None):
    """A report in which every family-config passes, but for `cells`: {(family, check): (status, finding, frames)}."""
    families = {}
    for family in FAMILIES:
        row = {"title": family, "model": f"org/{family}-7b", "checks": {}}
        for check in CHECKS:
            status, finding, frames = (cells or {}).get((family, check), ("pass", "", []))
            unit = {"status": status, "reason": finding or "ok", "finding": finding}
            if frames:
                unit["frames"] = frames
            row["checks"][check] = {"status": status, "reason": unit["reason"], "finding": finding, "details": [],
                                    "data": {"single.facts": {"tokens": 10}}, "variants": {"single": unit}}
        families[family] = row
    return {"schema": SCHEMA, "environment": {"vllm": vllm, "transformers": "5.16.1", "torch": "2.11.0"},
            "checks": CHECKS, "families": families}


FRAME = [{"package": "transformers", "file": "transformers/models/x/processing_x.py", "line": 120, "function": "expand"}]
CANDIDATE = {
    ("alpha", "served"): ("fail", "[single] image url http://127.0.0.1:40123/a.png answered 500: Internal error", []),
    ("beta", "served"): ("fail", "[single] image url http://127.0.0.1:40999/a.png answered 500: Internal error", []),
    ("gamma", "served"): ("fail", "[single] image url http://127.0.0.1:41000/a.png answered 500: Internal error", []),
    ("delta", "architecture"): ("fail", "[single] delta: DeltaForCausalLM is not a supported architecture of vllm 0.33.0", []),
    ("delta", "processor"): ("fail", "[single] delta: vLLM could not build its processor: KeyError: 'delta'", []),
    ("delta", "reference"): ("fail", "[single] no model class", []),
    ("alpha", "reference"): ("fail", "[single] transformers raised RuntimeError: shape '[-1, 14, 64]' is invalid for "
                                     "input of size 88128", FRAME),
}


def run(tmp_path, old, new, *extra, capsys):
    for name, rep in (("old.json", old), ("new.json", new)):
        (tmp_path / name).write_text(json.dumps(rep))
    code = cli.main(["diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--points", str(tmp_path), *extra])
    return code, capsys.readouterr().out


def test_seven_cells_are_three_causes_largest_first(tmp_path, capsys):
    code, out = run(tmp_path, report("0.24.0"), report("0.33.0", CANDIDATE), capsys=capsys)
    assert code == 4
    assert "CAUSES (3 causes in 7 cells" in out, out
    causes = out.split("CAUSES")[1].split("REGRESSIONS")[0]
    first, second, third = causes.split("\n  1. ")[1], causes.split("\n  2. ")[1], causes.split("\n  3. ")[1]
    assert first.startswith("[vllm] image url") and "3 cells (served x3) in 3 families: alpha, beta, gamma" in first
    assert second.startswith("[vllm] the architecture left vLLM's model registry")
    assert "3 cells (architecture x1, processor x1, reference x1) in 1 families: delta" in second
    assert third.startswith("[transformers] transformers raised RuntimeError")
    assert "raised at: transformers/models/x/processing_x.py:120 in expand" in third
    assert "alpha reference [single]: pass -> fail: [single] transformers raised RuntimeError" in out
    assert "\n    raised at: transformers/models/x/processing_x.py:120 in expand" in out.split("REGRESSIONS")[1]
    assert out.index("CAUSES") < out.index("REGRESSIONS")  # causes first, the cells below


def test_the_cause_key_masks_what_differs_between_cells_of_one_cause():
    a = key_of("[single] alpha: port 40123 answered 500 in /tmp/x/alpha-0123456789abcdef/a.png", "alpha",
               ["alpha", "org/alpha-7b"])
    b = key_of("[multi_image] beta: port 555 answered 500 in /tmp/y/beta-fedcba9876543210/a.png", "beta",
               ["beta", "org/beta-7b"])
    assert a == b
    assert key_of("vllm raised KeyError: 'x'", "a", ["a"]) != key_of("vllm raised ValueError: 'x'", "a", ["a"])


def test_first_bad_release_from_the_measured_points(tmp_path):
    points = tmp_path / "points"
    points.mkdir()
    for vllm, status, reason in (("0.24.0", "pass", ""), ("0.25.0", "fail", "[single] a tokenizer error"),
                                 ("0.26.0", "fail", "[single] port 41234 answered 500"), ("0.33.0", "fail", "answered 500")):
        cells = {"alpha": {"served": {"status": status, "outcome": status, "reason": reason, "key": vllm, "facts": {}}}}
        (points / f"vllm-{vllm}_transformers-5.16.1.json").write_text(json.dumps(
            {"point": {"vllm": vllm, "transformers": "5.16.1"}, "cells": cells, "runs": [], "environment": {}}))
    from vlcheck.versions.points import point_index

    index = point_index(tmp_path, {"vllm": "0.24.0", "transformers": "5.16.1"},
                        {"vllm": "0.33.0", "transformers": "5.16.1"})
    causes = group([Cell("alpha", "served [single]", "regression", "port 40000 answered 500")], report("0.33.0"), index)
    assert causes[0].first_bad == "vLLM 0.26.0 (with transformers 5.16.1)"  # 0.25.0 failed, but for another reason


def test_json_html_and_fail_on(tmp_path, capsys):
    old, new = report("0.24.0"), report("0.33.0", CANDIDATE)
    code, out = run(tmp_path, old, new, "--json", str(tmp_path / "d.json"), "--html", str(tmp_path / "d.html"),
                    capsys=capsys)
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"] == "REGRESSED" and doc["exit"] == 4 == code
    assert [len(c["cells"]) for c in doc["causes"]] == [3, 3, 1]
    assert doc["causes"][2]["cells"][0]["frames"] == FRAME
    page = (tmp_path / "d.html").read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page.split("<body>")[0]
    assert "Causes (3 causes in 7 cells)" in page and 'class="first"' in page  # the first differing leaf is marked
    code, out = run(tmp_path, old, new, "--fail-on", "incomplete,changed", capsys=capsys)
    assert code == 0 and "exit 0: the verdict REGRESSED is not one of --fail-on incomplete,changed" in out
    code, _ = run(tmp_path, old, new, "--fail-on", "regressed", capsys=capsys)
    assert code == 4


def test_fail_on_names_unknown_verdicts(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run(tmp_path, report("0.24.0"), report("0.33.0"), "--fail-on", "worse", capsys=capsys)
    assert exc.value.code == 2
