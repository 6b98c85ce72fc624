"""What the template and stops checks need from a model's Hub files, and the fewest files to bring.

Each test builds its own offline HF cache (standard layout) so it runs in the bare new-user setting too.
"""

import dataclasses
import json

import pytest

from vlcheck.prompt import assets, hub_files
from vlcheck.prompt.assets import ModelAssets, fetch
from vlcheck.prompt.conformance import match_unknown_special, stop_conformance, UNKNOWN_SPECIAL
from vlcheck.core.results import Status
from vlcheck.spec.registry import get_family

REPO = "vlcheck-test/tiny-vlm"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An offline HF cache holding the files a test writes into it."""
    snapshot = tmp_path / ("models--" + REPO.replace("/", "--")) / "snapshots" / "c0ffee"
    snapshot.mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("c0ffee")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr(assets, "hub_cache", lambda: str(tmp_path))
    fetch.cache_clear()

    def write(filename, content):
        (snapshot / filename).write_text(content if isinstance(content, str) else json.dumps(content))
        fetch.cache_clear()

    yield write
    fetch.cache_clear()


@pytest.fixture
def variant_of():
    """LLaVA-1.5's single-image example (placeholder "<image>", no stop tokens), pointed at another repo."""
    def of(repo):
        spec = get_family("llava")
        return spec, dataclasses.replace(spec.single, model=repo, revision=None)
    return of


def test_nothing_here_names_one_file_that_alone_would_do(hub):
    clause = hub_files.what_would_do((hub_files.TOKEN_IDS,), ModelAssets(REPO))
    assert clause == (f"tokenizer_config.json alone from {REPO} would give the special tokens' ids "
                      "(or added_tokens.json, or tokenizer.json)")


def test_a_file_here_without_the_fact_is_named_and_not_offered(hub):
    hub("tokenizer_config.json", {"model_max_length": 8192})  # Qwen-VL's: no added_tokens_decoder
    assets_ = ModelAssets(REPO)
    assert hub_files.smallest_sets((hub_files.TOKEN_IDS,), assets_) == [("added_tokens.json",), ("tokenizer.json",)]
    assert "tokenizer_config.json is here but lacks added_tokens_decoder" in hub_files.what_would_do(
        (hub_files.TOKEN_IDS,), assets_)


def test_one_file_giving_two_facts_beats_two_files(hub):
    facts = (hub_files.TOKEN_IDS, hub_files.EOS_STRING)
    assert hub_files.smallest_sets(facts, ModelAssets(REPO))[0] == ("tokenizer_config.json",)
    hub("tokenizer_config.json", {"eos_token": "</s>"})  # gives the eos string, not the ids
    assert hub_files.smallest_sets(facts, ModelAssets(REPO)) == [("added_tokens.json",), ("tokenizer.json",)]


def test_stops_run_on_tokenizer_config_alone_and_say_where_each_fact_came_from(hub, variant_of):
    hub("tokenizer_config.json", {"eos_token": "</s>", "added_tokens_decoder": {
        "2": {"content": "</s>"}, "32000": {"content": "<image>"}}})
    result = stop_conformance(*variant_of(REPO))
    assert result.status is Status.PASS, result.reason
    assert result.data["single.sources"] == {"token ids": "tokenizer_config.json (its added_tokens_decoder)",
                                             "eos token": "tokenizer_config.json (its eos_token)", "model eos": "none"}
    hub("generation_config.json", {"eos_token_id": [2, 7]})
    result = stop_conformance(*variant_of(REPO))
    assert result.data["single.vllm_stop_ids"] == [2, 7]
    assert result.data["single.sources"]["model eos"] == "generation_config.json (its eos_token_id)"


def test_stops_skip_names_the_smallest_set(hub, variant_of):
    hub("generation_config.json", {"eos_token_id": 2})
    result = stop_conformance(*variant_of(REPO))
    assert result.status is Status.SKIP
    assert "tokenizer_config.json alone from vlcheck-test/tiny-vlm would give the special tokens' ids" in result.reason


def test_unknown_bos_matches_one_special_token_used_consistently():
    bos = UNKNOWN_SPECIAL["bos_token"]
    assert match_unknown_special("<bos><turn>hi", f"{bos}<turn>hi") == {"bos_token": "<bos>"}
    assert match_unknown_special("<s>[INST]x", f"{bos}[INST]x") == {"bos_token": "<s>"}
    assert match_unknown_special("<turn>hi", f"{bos}<turn>hi") is None  # no bos at all is a difference
    assert match_unknown_special("hello<turn>hi", f"{bos}<turn>hi") is None  # plain text is not a token
    assert match_unknown_special("<a>x<b>", f"{bos}x{bos}") is None  # one string for every use
    assert match_unknown_special("<a>x<a>", f"{bos}x{bos}") == {"bos_token": "<a>"}


def test_missing_files_rows_mark_what_to_fetch(hub, variant_of):
    hub("tokenizer_config.json", {"model_max_length": 8192})
    rows = hub_files.file_rows("tiny", variant_of(REPO)[1])
    fetch_ = {(r.check, r.filename) for r in rows if r.fetch}
    assert fetch_ == {("template", "chat_template.jinja"), ("stops", "added_tokens.json")}
    states = {(r.check, r.filename): r.state for r in rows}
    assert states[("stops", "tokenizer_config.json")] == "found, lacks added_tokens_decoder"
    assert states[("stops", "generation_config.json")] == "missing offline"


def test_list_missing_files_offers_a_fetch_exactly_where_a_template_check_cannot_run(capsys):
    from vlcheck.cli.main import main

    assert main(["list", "--missing-files", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    groups = {}
    for row in rows:
        groups.setdefault((row["family"], row["variant"], row["check"]), []).append(row)
    assert {check for _, _, check in groups} == {"template", "stops"}
    for (family, variant, check), group in groups.items():
        if check != "template" or not any(r["role"] == "required" for r in group):
            continue  # an explicit template needs no file
        runs = any(r["role"] == "required" and r["state"] == "found" for r in group)
        assert any(r["fetch"] for r in group) != runs, (family, variant, group)


def test_list_missing_files_is_tab_separated_for_scripts(capsys):
    from vlcheck.cli.main import main

    assert main(["list", "--missing-files"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == ["family", "variant", "check", "repo", "revision", "file", "state", "role", "fetch"]
    assert all(len(line.split("\t")) == 9 and line.split("\t")[8] in ("yes", "no") for line in lines[1:])
