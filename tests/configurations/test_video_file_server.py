"""Which server the video_file configuration sends its mp4 to: the engine's own, where the served
checks share the engine and the configuration adds no engine args (on vLLM's CPU build a server of
its own was 140 s of qwen2_vl-single's 357 s in CI's engine tier), else one of its own."""

from types import SimpleNamespace

from vlcheck.configurations import video_file
from vlcheck.configurations.outcome import Measured
from vlcheck.engine import engine_server


class Answering:
    url, start_seconds, stopped = "http://127.0.0.1:1", 1.0, False

    def stop(self):
        self.stopped = True

    def log_tail(self, lines=20):
        return ""


def _served(monkeypatch, handle, shared):
    started = []

    def start(platform, args, template):
        started.append(args)
        return Answering()

    class Client:
        def __init__(self, *args):
            pass

        def chat(self, messages, **kw):
            return SimpleNamespace(ok=True, body={"choices": [{"logprobs": {"content": []}}], "usage": {"prompt_tokens": 3}})

    monkeypatch.setattr(engine_server, "start", start)
    monkeypatch.setattr("vlcheck.served.client.Client", Client)
    monkeypatch.setattr(video_file, "as_golden", lambda body: body)
    monkeypatch.setattr("vlcheck.served.requests.chat_messages", lambda *a, **k: [])
    inputs = SimpleNamespace(engine_args={"model": "/m"}, template="t", question="q", clip=SimpleNamespace(url="data:"))
    measured = Measured()
    video_file._served(handle, SimpleNamespace(kind="single"), inputs, measured, shared=shared)
    return started, measured


def test_the_engines_own_server_takes_the_file_where_the_configuration_adds_no_engine_args(monkeypatch):
    own = Answering()
    started, measured = _served(monkeypatch, SimpleNamespace(platform="cpu", server=own), shared=True)
    assert started == [] and not own.stopped  # no second engine, and the shared one keeps serving
    assert measured.facts["server"].startswith("the engine's own")


def test_a_server_of_its_own_without_a_shared_one_or_with_engine_args(monkeypatch):
    started, measured = _served(monkeypatch, SimpleNamespace(platform="cpu", server=None), shared=True)
    assert len(started) == 1 and measured.facts["server"] == "its own"
    started, _ = _served(monkeypatch, SimpleNamespace(platform="cpu", server=Answering()), shared=False)
    assert len(started) == 1
