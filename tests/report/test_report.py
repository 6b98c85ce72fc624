"""The report a person reads before approving an upgrade, and the diff CI gates on."""

import copy
from collections import Counter
import json
from html.parser import HTMLParser

import pytest

from vlcheck.gate import cli, diff, report
from vlcheck.gate.checks import check_spec, check_template, run_checks
from vlcheck.spec.registry import all_families


@pytest.fixture(scope="module")
def rep():
    families = all_families()
    results = run_checks(families.values(), {"spec": check_spec, "template": check_template})
    return report.build(results, ["spec", "template"], families)


class _Cells(HTMLParser):
    """Row headers and cell statuses of the matrix, and the summary counts, as a browser sees them."""

    def __init__(self):
        super().__init__()
        self.families, self.counts, self.links, self.anchors, self.cells = [], {}, [], set(), []
        self._in_fam = self._count = self._in_cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "th" and a.get("class") == "fam":
            self._in_fam = True
        if tag == "td" and a.get("class") == "cell":
            self._in_cell = True
        if tag == "b" and a.get("class") == "count":
            self._count = a["data-status"]
        if tag == "a" and a.get("href", "").startswith("#"):
            self.links.append(a["href"][1:])
        if tag == "section" and "id" in a:
            self.anchors.add(a["id"])
        if tag in ("link", "script", "img") and any(v and v.startswith("http") for v in a.values()):
            raise AssertionError(f"the report fetches {a}")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self.cells.append(data)
        if self._in_fam:
            self.families.append(data)
            self._in_fam = False
        if self._count:
            self.counts[self._count] = int(data)
            self._count = None


def test_html_shows_every_family_and_the_json_counts(rep):
    page = _Cells()
    page.feed(report.to_html(rep))
    assert page.families == list(rep["families"]) and len(page.families) == len(all_families())
    assert page.counts == rep["summary"]
    # the counts shown must be those of the cells shown, not just the numbers copied from the JSON
    assert dict(Counter(page.cells)) == {s: n for s, n in rep["summary"].items() if n}
    assert page.links and set(page.links) <= page.anchors  # every failure/skip links to its detail


def _with_status(rep, family, check, status, reason="broken"):
    new = copy.deepcopy(rep)
    new["families"][family]["checks"][check].update(status=status, reason=reason)
    return new


def _passing(rep, *families, check="template"):
    """The report with these cells passing: without the HF cache a template check skips, and the
    diff rules below are about cells that were fine before."""
    for family in families:
        rep = _with_status(rep, family, check, "pass", "hand == template")
    return rep


def test_markdown_lists_declared_deviations(rep):
    text = report.to_markdown(_with_status(rep, "llava", "template", "declared deviation", "a space, not a newline"))
    assert "### Declared deviations" in text and "**llava** template" in text


def test_diff_flags_a_newly_failing_check(rep):
    rep = _passing(rep, "qwen2_vl")
    d = diff.compare(rep, _with_status(rep, "qwen2_vl", "template", "fail"))
    assert d.regressed and d.regressions == ["qwen2_vl template: pass -> fail: broken"]
    assert diff.to_markdown(d).startswith("## vlcheck diff: ❌ REGRESSED") and d.verdict == "REGRESSED"


def test_diff_pass_to_deviation_is_a_regression_and_skip_is_lost_coverage(rep):
    rep = _passing(rep, "qwen2_vl", "qwen2_5_vl")
    new = _with_status(_with_status(rep, "qwen2_vl", "template", "declared deviation"), "qwen2_5_vl", "template", "skip")
    d = diff.compare(rep, new)
    assert [r.split(":")[0] for r in d.regressions] == ["qwen2_vl template"]
    assert [r.split(":")[0] for r in d.lost_coverage] == ["qwen2_5_vl template"]


def test_diff_shows_a_moved_prompt(rep):
    new = copy.deepcopy(rep)
    prompts = new["families"]["llava"]["checks"]["spec"]["data"]["prompts"]
    prompts[5] = prompts[5].replace("\\nASSISTANT:", " ASSISTANT:")
    d = diff.compare(rep, new)
    assert not d.regressed and any(m.startswith("llava spec: prompts changed") for m in d.moved)


def test_diff_command_exit_codes(rep, tmp_path, capsys):
    old, same, bad = tmp_path / "old.json", tmp_path / "same.json", tmp_path / "bad.json"
    old.write_text(json.dumps(rep))
    same.write_text(json.dumps(rep))
    bad.write_text(json.dumps(_with_status(rep, "llava", "spec", "fail")))
    assert cli.main(["diff", str(old), str(same)]) == 0
    assert cli.main(["diff", str(old), str(bad), "--markdown", str(tmp_path / "pr.md")]) == 1
    assert "REGRESSED" in capsys.readouterr().out and (tmp_path / "pr.md").read_text().startswith("## vlcheck diff")


def test_an_error_is_never_a_regression_and_makes_the_verdict_inconclusive(rep):
    new = _with_status(rep, "qwen2_vl", "template", "error")
    d = diff.compare(rep, new)
    assert not d.regressions and d.verdict == "INCONCLUSIVE" and d.exit_code == 3
    assert [n.split(":")[0] for n in d.not_run] == ["qwen2_vl template"] and "new side" in d.not_run[0]
    # a real regression elsewhere still decides the verdict
    d = diff.compare(rep, _with_status(new, "llava", "spec", "fail"))
    assert d.verdict == "REGRESSED" and d.exit_code == 1 and len(d.not_run) == 1
    # and an error on the old side is not a fix either
    d = diff.compare(new, rep)
    assert not d.fixed and "old side" in d.not_run[0]


def test_a_declaration_that_no_longer_applies_shows_as_fixed_or_regressed(rep):
    deviated = _with_status(rep, "llava", "template", "declared deviation")
    assert [f.split(":")[0] for f in diff.compare(deviated, _with_status(rep, "llava", "template", "pass")).fixed] == \
        ["llava template"]
    assert [r.split(":")[0] for r in diff.compare(deviated, _with_status(rep, "llava", "template", "fail")).regressions] \
        == ["llava template"]


def test_facts_measured_on_one_side_are_not_measured_never_moved_to_empty(rep):
    new = copy.deepcopy(rep)
    del new["families"]["llava"]["checks"]["spec"]["data"]["prompts"]
    d = diff.compare(rep, new)
    assert d.not_measured == ["llava spec: prompts: not measured on the new side"]
    assert not any(m.startswith("llava spec") for m in d.moved)


def test_errors_are_shown_apart_from_failures_in_markdown_and_html(rep):
    fails_before = sum(c["status"] == "fail" for row in rep["families"].values() for c in row["checks"].values())
    both = _with_status(_with_status(rep, "qwen2_vl", "template", "error"), "llava", "spec", "fail")
    both["summary"] = dict(Counter(c["status"] for row in both["families"].values() for c in row["checks"].values()))
    text = report.to_markdown(both)
    failures, errors = text.split("### Errors")
    assert "**llava** spec" in failures.split("### Failures")[1] and "**qwen2_vl** template" in errors
    page = _Cells()
    page.feed(report.to_html(both))
    assert Counter(page.cells)["error"] == 1 and Counter(page.cells)["fail"] == fails_before + 1


def test_a_declaration_out_of_its_versions_is_not_a_fact_of_the_diff(rep):
    new = copy.deepcopy(rep)
    new["families"]["llava"]["checks"]["template"]["data"]["single.declaration_not_applied"] = "template"
    d = diff.compare(rep, new)
    assert not any("declaration_not_applied" in line for line in d.not_measured + d.moved)
