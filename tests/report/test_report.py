"""The report a person reads before approving an upgrade, and the diff CI gates on."""

import copy
from collections import Counter
from html.parser import HTMLParser

import pytest

from vlcheck.gate import report
from vlcheck.gate.checks import cpu_checks, run_checks
from vlcheck.spec.registry import all_families


@pytest.fixture(scope="module")
def rep():
    families = all_families()
    results = run_checks(families.values(), cpu_checks(["spec", "template"]))
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


def test_markdown_lists_declared_deviations(rep):
    # built here: without the HF cache the llava template check skips instead of deviating
    text = report.to_markdown(_with_status(rep, "llava", "template", "declared deviation", "a space, not a newline"))
    assert "### Declared deviations" in text and "**llava** template" in text


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
