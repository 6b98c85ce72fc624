"""The four outcomes of fetching a Hub file, told apart."""

import pytest

from vlcheck.prompt import assets
from vlcheck.prompt.assets import Status, fetch


@pytest.fixture(autouse=True)
def fresh_cache():
    fetch.cache_clear()
    yield
    fetch.cache_clear()


def test_found_in_offline_cache():
    asset = fetch("llava-hf/llava-1.5-7b-hf", "chat_template.jinja")
    if asset.status is Status.MISSING_OFFLINE:
        pytest.skip(asset.why())
    assert asset.found and "ASSISTANT" in asset.text()


def test_missing_offline_names_the_file(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    asset = fetch("vlcheck-test/no-such-model", "tokenizer_config.json")
    assert asset.status is Status.MISSING_OFFLINE
    assert asset.why() == ("vlcheck-test/no-such-model/tokenizer_config.json is not in the HF cache "
                           "and HF_HUB_OFFLINE is set")


def _hub_error(cls, message):
    """A huggingface_hub HTTP error as the client raises it, without a server."""
    import httpx

    response = httpx.Response(401 if "gated" in message else 404, request=httpx.Request("GET", "https://hf.co"))
    return cls(message, response=response)


def _raising(error):
    def download(*args, **kwargs):
        raise error
    return download


def test_gated_says_set_hf_token(monkeypatch):
    from huggingface_hub.errors import GatedRepoError

    monkeypatch.setattr("huggingface_hub.hf_hub_download", _raising(_hub_error(GatedRepoError, "401 gated repo")))
    asset = fetch("meta-llama/Llama-3.2-11B-Vision-Instruct", "config.json")
    assert asset.status is Status.GATED and "set HF_TOKEN" in asset.why()


def test_missing_repo_upstream_is_not_found(monkeypatch):
    from huggingface_hub.errors import RepositoryNotFoundError

    monkeypatch.setattr("huggingface_hub.hf_hub_download", _raising(_hub_error(RepositoryNotFoundError, "404 not found")))
    asset = fetch("org/typo-model", "config.json")
    assert asset.status is Status.NOT_FOUND and "no such repo" in asset.detail


def test_cache_marker_of_absent_file(tmp_path, monkeypatch):
    repo = tmp_path / "models--org--m"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / ".no_exist" / "abc123").mkdir(parents=True)
    (repo / ".no_exist" / "abc123" / "chat_template.json").write_text("")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(assets, "hub_cache", lambda: str(tmp_path))
    assert assets._known_missing("org/m", "chat_template.json", None)
    assert not assets._known_missing("org/m", "config.json", None)
