"""The generated compatibility page (`vlcheck matrix report --markdown docs/compatibility.md`): each
change reads as its new outcome or its first moved fact (old -> new), never as a digest, never
cut inside a word, never `pass -> pass` without what moved; the page links to the points from
where it is written."""

import json
import re

from vlcheck.gate import measured
from vlcheck.versions import compat_report
from vlcheck.versions.matrix import Axes, Grid
from vlcheck.versions.points import Point, Store

ENV = {"vllm": "0.24.0", "transformers": "5.16.1"}


def digest(status="pass", reason="ok", data=None, details=()):
    return measured.digest({"status": status, "reason": reason, "details": list(details), "data": data or {}}, ENV)


def text(base, cell, full=(None, None)):
    parts = compat_report.describe(base, cell, full)
    return compat_report.as_text(parts), compat_report.as_markdown(parts)


def test_a_moved_fact_reads_as_its_first_difference_not_as_pass_to_pass():
    old = digest(data={"single.placement": ["served: template's: typed '<image>'; expanded at token [5]",
                                            "cache off: error: ValueError <- StopIteration:"]})
    new = digest(data={"single.placement": ["served: template's: typed '<image>'; expanded at token [5]",
                                            "cache off: template's: typed '<image>'; expanded at token [6]"]})
    plain, md = text(old, new)
    assert "pass -> pass" not in plain
    assert plain.startswith("single.placement[1]: cache off: error: ValueError <- StopIteration: -> cache off: template's")
    assert "`single.placement[1]`" in md and "`cache off: error: ValueError <- StopIteration:`" in md  # `<image>` in code
    counts = lambda n: digest(data={"single.token_counts": {"video x1": {"item_tokens": [n], "prompt_tokens": 31 + n}}})  # noqa: E731
    assert text(counts(136), counts(72))[0] == 'single.token_counts["video x1"]["item_tokens"][0]: 136 -> 72'


def test_a_digest_is_named_never_shown_and_the_full_report_gives_the_difference():
    big = lambda word: {"single.hostile": [f"case {i}: handled" for i in range(40)] + [f"last case: {word}"]}  # noqa: E731
    old, new = digest(data=big("broken")), digest(data=big("handled"))
    assert "sha256" in json.dumps(old["facts"]), "the points keep a large fact as its hash"
    plain, md = text(old, new)
    assert plain == "the single.hostile fact changed (its text is in the run's report)"
    assert not re.search(r"sha256|\d+ chars|[0-9a-f]{16}", md)
    plain, _ = text(old, new, (big("broken"), big("handled")))  # the full reports are there
    assert plain == "single.hostile[40]: last case: broken -> last case: handled"


def test_a_long_change_is_cut_at_a_word_boundary():
    reason = "[single] vllm raised ValueError: " + " ".join(f"word{i:03d}" for i in range(80))
    plain, md = text(digest(), digest("fail", reason))
    assert plain.startswith("pass -> fail: [single] vllm raised ValueError: word000")
    kept = plain.split(": ", 1)[1]
    assert kept.endswith(" …") and reason.startswith(kept[:-2]) and reason[len(kept) - 2] == " "
    assert "`" in md and md.count("`") % 2 == 0
    assert compat_report.clip("x" * 300, 50) == "x" * 300  # one word: kept whole, not cut
    assert compat_report.readable("see facebook/chameleon-7b/chat_template.jinja in /root/.cache/a/b") == \
        "see facebook/chameleon-7b/chat_template.jinja in b"  # a Hub id kept; a machine path to its name


def test_unchanged_outcomes_say_what_moved():
    plain, _ = text(digest("skip", "[single] no chat template: a.jinja is not cached"),
                    digest("skip", "[single] no checkpoint: no config class"))
    assert plain.startswith("still skips; its reason reads otherwise: [single] no chat template")
    plain, _ = text(digest("fail", "boom", details=["[single] AttributeError"]),
                    digest("fail", "boom", details=["[single] KeyError"]))
    assert plain == "still fails; the failure's details changed (their text is in the run's report)"
    plain, _ = text(digest("fail", "[single] it broke"), digest())
    assert plain == "fail -> pass (it fails on the reference: [single] it broke)"


def test_the_page_is_made_and_its_section_replaced_with_links_from_where_it_is(tmp_path):
    root = tmp_path / "compat"
    store = Store(root, log=lambda m: None)
    axes = Axes(["0.24.0", "0.25.0"], ["5.16.1"], ["0.24.0", "0.25.0"], ["5.16.1"])
    axes.save(root)
    rows = lambda n: {"qwen3_vl": {"title": "q", "model": "q", "checks": {  # noqa: E731
        "processor": {"status": "pass", "reason": "ok", "details": [], "data": {"single.tokens": n}}}}}
    for v, n in (("0.24.0", 136), ("0.25.0", 72)):
        store.add_report(Point(v, "5.16.1"), {"environment": {"vllm": v, "transformers": "5.16.1"},
                                              "checks": ["processor"], "summary": {}, "families": rows(n)},
                         {"whole": True, "check_s": 10})
    grid = Grid(store, axes)
    page = tmp_path / "docs" / "compatibility.md"
    compat_report.write_readme(grid, page, root)
    out = page.read_text()
    assert out.startswith("# Compatibility") and compat_report.BEGIN in out
    assert "| qwen3_vl | processor | `single.tokens`: `136` -> `72` | 0.25.0 (last same 0.24.0) | - |" in out
    assert "(../compat/points/vllm-0.25.0_transformers-5.16.1.json)" in out
    old_marker = "<!-- vlcheck matrix: generated by `vlcheck matrix report --readme README.md` from compat/; do not edit -->"
    page.write_text("# Mine\n\nkept\n\n" + old_marker + "\nstale rows\n" + compat_report.END + "\n\ntail\n")
    compat_report.write_readme(grid, page, root)
    out = page.read_text()
    assert out.startswith("# Mine\n\nkept\n\n" + compat_report.BEGIN) and out.endswith(compat_report.END + "\n\ntail\n")
    assert "stale rows" not in out and out.count(compat_report.END) == 1


def test_a_digested_fact_is_shown_from_the_full_report_in_runs_when_it_is_kept(tmp_path):
    root = tmp_path / "compat"
    axes = Axes(["0.24.0", "0.25.0"], ["5.16.1"], ["0.24.0", "0.25.0"], ["5.16.1"])
    axes.save(root)
    store = Store(root, log=lambda m: None)
    lines = lambda last: [f"case {i}: handled" for i in range(40)] + [f"last case: {last}"]  # noqa: E731
    for v, last in (("0.24.0", "broken"), ("0.25.0", "handled")):
        report = {"environment": {"vllm": v, "transformers": "5.16.1"}, "checks": ["hostile"], "summary": {},
                  "families": {"llava": {"title": "l", "model": "l", "checks": {"hostile": {
                      "status": "pass", "reason": "ok", "details": [], "data": {"single.hostile": lines(last)}}}}}}
        (root / "runs").mkdir(parents=True, exist_ok=True)
        (root / "runs" / f"{v}.json").write_text(json.dumps(report))
        store.add_report(Point(v, "5.16.1"), report, {"whole": True}, source=f"{v}.json")
    row = next(line for line in compat_report.readme_section(Grid(store, axes), "compat").splitlines()
               if line.startswith("| llava | hostile |"))
    assert "`single.hostile[40]`: `last case: broken` -> `last case: handled`" in row
    (root / "runs" / "0.25.0.json").unlink()  # the full reports are not committed
    row = next(line for line in compat_report.readme_section(Grid(Store(root, log=lambda m: None), axes),
                                                             "compat").splitlines() if line.startswith("| llava |"))
    assert "the `single.hostile` fact changed (its text is in the run's report)" in row and "sha256" not in row
