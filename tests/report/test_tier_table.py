"""The GPU tier's closing table, from each family-config's JUnit XML and the summary."""

from vlcheck.runners.tier_table import rows, table

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase name="test_a"><properties><property name="engine_start_s" value="23.4"/></properties></testcase>
<testcase name="test_b"><failure message="boom"/></testcase>
<testcase name="test_c"><skipped type="pytest.xfail" message="declared deviation"/></testcase>
<testcase name="test_d"><skipped type="pytest.skip" message="needs --vlcheck-cache-off"/></testcase>
<testcase name="test_e"><error message="setup"/></testcase>
</testsuite></testsuites>"""


def test_one_row_per_family_config_with_outcomes_engine_starts_and_wall_time(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "qwen2_vl-single.xml").write_text(JUNIT)
    (tmp_path / "summary.txt").write_text("qwen2_vl single rc=1 61s 1 failed, 1 passed [gpu 0]\n"
                                          "deepseek_ocr single rc=124 300s  [gpu 0]\ngpu tier: 300 s wall\n")
    found = {r.config: r for r in rows(tmp_path)}
    qwen = found["qwen2_vl-single"]
    assert qwen.counts == {"passed": 1, "failed": 1, "error": 1, "xfailed": 1, "skipped": 1}
    assert (qwen.engine_starts, qwen.wall_s, qwen.rc) == ([23.4], 61, 1)
    text = table(list(found.values()))
    assert "| qwen2_vl-single | 1 | 1 | 1 | 1 | 1 | 23 | 61 | 1 |" in text
    assert "| deepseek_ocr-single | 0 | 0 | 0 | 0 | 0 | - | 300 | timeout |" in text


def test_vlcheck_tier_table_prints_either_tiers_table(tmp_path, capsys):
    from vlcheck.cli.main import main

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "qwen2_vl-single.xml").write_text(JUNIT)
    assert main(["tier", "table", str(tmp_path)]) == 0
    assert "| qwen2_vl-single | 1 | 1 | 1 | 1 | 1 | 23 | - | - |" in capsys.readouterr().out
    shard = tmp_path / "shard-1.xml"  # the CPU engine tier's: test ids carry the family-config
    shard.write_text(JUNIT.replace('name="test_a"', 'name="test_a[cpu-qwen2_vl-single]"'))
    assert main(["tier", "table", str(shard)]) == 0
    assert "| qwen2_vl-single | 23.4 | 1 | 0 | 0 | 0 | 0 |" in capsys.readouterr().out
    assert main(["tier", "table", str(tmp_path / "nothing.xml")]) == 2
