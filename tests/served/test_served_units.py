"""The served layer's pieces that need no server: launch flags, the bad-request classification,
the `vllm serve` line parser's messages and hints, Prometheus counters."""

import os

import pytest

from vlcheck.served.bad_requests import CASES, BadRequest, classify, normalized
from vlcheck.served.client import Reply
from vlcheck.served.launch import flag, serve_limit
from vlcheck.spec.registry import get_family


def test_engine_args_become_the_flags_a_user_types():
    assert flag("max_model_len", 4096) == ["--max-model-len", "4096"]
    assert flag("enforce_eager", True) == ["--enforce-eager"]
    assert flag("enable_prefix_caching", False) == ["--no-enable-prefix-caching"]  # on by default
    assert flag("disable_log_stats", False) == []  # vLLM's default, and a store_true without --no-
    assert flag("cuda_graph_sizes", [1, 2]) == ["--cuda-graph-sizes", "1", "2"]
    assert flag("mm_processor_kwargs", {"min_pixels": 784}) == ["--mm-processor-kwargs", '{"min_pixels": 784}']
    spec = get_family("qwen2_vl")
    assert serve_limit(spec.single) == {"image": 1, "video": 1}  # one server takes both modalities
    assert serve_limit(spec.multi_image) == {"image": 2}


def test_every_engine_arg_vlcheck_serves_reads_back_the_same_through_vllms_own_parser():
    # the served engines and the render server write their flags with one writer; a False dropped
    # there served prefix caching while the offline engine ran without it
    from vlcheck.adapter.render_server import cpu_platform
    from vlcheck.adapter.serve_args import _parser
    from vlcheck.configurations.registry import CONFIGURATIONS
    from vlcheck.engine.engines import TEST_ENGINE_ARGS
    from vlcheck.engine.serve_flags import flags

    args = {**TEST_ENGINE_ARGS, "enable_prefix_caching": False, "enable_chunked_prefill": False,
            "limit_mm_per_prompt": {"image": 2}, "max_model_len": 4096}
    for configuration in CONFIGURATIONS.values():
        args.update(configuration.engine_args)
    with cpu_platform():
        parsed = vars(_parser().parse_args(["serve", "m", *flags(args)]))
    # a nested config (compilation_config) reads back as vLLM's config object, its defaults filled in:
    # the fields written must be there with their values
    assert {k: (parsed[k] if isinstance(parsed[k], (dict, list, str, int, float, bool, type(None)))
                else {f: getattr(parsed[k], f) for f in v}) for k, v in args.items()} == args


def test_a_5xx_a_hang_and_an_unexpected_200_are_failures():
    case = BadRequest("x", lambda v, m, n: [])
    assert classify(case, Reply(400, {"error": {"message": "Non-base64 digit found"}}, 0.1)).failure == ""
    assert "4xx" in classify(case, Reply(500, {"error": {"message": "boom"}}, 0.1)).failure
    assert "no answer" in classify(case, Reply(None, None, 30.0, "no answer within 30 s")).failure
    assert "cannot be served" in classify(case, Reply(200, {"token_ids": [1, 2]}, 0.1)).failure
    assert classify(BadRequest("y", lambda v, m, n: [], may_accept=True), Reply(200, {"token_ids": [1]}, 0.1)).failure == ""
    assert "without a message" in classify(case, Reply(422, {}, 0.1)).failure


def test_messages_lose_what_changes_run_to_run():
    text = "Cannot connect to host 127.0.0.1:40123 [('127.0.0.1', 40123)] <_io.BytesIO object at 0x7f0011223344>"
    assert normalized(text) == "Cannot connect to host 127.0.0.1:PORT [('127.0.0.1', PORT)] <_io.BytesIO object at 0x…>"


def test_every_case_has_a_unique_name():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


def test_rejected_serve_flag_is_named_with_its_migration():
    from vlcheck.served.launch_lines import check_line

    launch, served = check_line("vllm serve Qwen/Qwen2-VL-7B-Instruct --disable-mm-preprocessor-cache")
    assert launch.status.value == "fail" and served.status.value == "skip"
    assert "rejects --disable-mm-preprocessor-cache" in launch.reason
    assert "--mm-processor-cache-gb 0" in launch.reason
    assert launch.data["launch.rejected"] == "--disable-mm-preprocessor-cache"


def test_old_limit_syntax_is_explained():
    from vlcheck.served.launch_lines import check_line

    launch, _ = check_line("vllm serve Qwen/Qwen2-VL-7B-Instruct --limit-mm-per-prompt image=2")
    assert "rejects --limit-mm-per-prompt" in launch.reason
    assert """'{"image": 2}'""" in launch.reason, launch.reason


def test_prometheus_counters_are_summed_over_labels():
    from vlcheck.engine.engine_server import metric

    text = ('# HELP vllm:mm_cache_hits_total x\nvllm:mm_cache_hits_total{engine="0",model_name="m"} 3.0\n'
            'vllm:mm_cache_hits_total{engine="1",model_name="m"} 2.0\nvllm:mm_cache_queries_total 9.0\n')
    assert metric(text, "vllm:mm_cache_hits") == 5.0
    assert metric(text, "vllm:mm_cache_queries") == 9.0


@pytest.mark.parametrize("line", ["--max-model-len 4096", "vllm serve"])
def test_a_line_without_a_model_is_rejected(line):
    from vlcheck.adapter.serve_args import ServeLineRejected, split

    with pytest.raises(ServeLineRejected, match="no model"):
        split(line)


def test_a_long_metrics_page_comes_back_whole():
    """A server's /metrics runs to tens of kB, the multimodal cache counters far down: a client that
    cut text answers short read them as 0 (the GPU served tier's uuid check failed so on every family)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from vlcheck.engine.engine_server import metric
    from vlcheck.served.client import Client

    page = ("# filler\n" * 5000 + 'vllm:mm_cache_hits_total{engine="0",model_name="m"} 1.0\n').encode()

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = Client(f"http://127.0.0.1:{server.server_address[1]}", model="m").metrics()
    finally:
        server.shutdown()
    assert len(text) == len(page)
    assert metric(text, "vllm:mm_cache_hits") == 1.0


def test_a_launch_line_is_served_and_compared_with_the_offline_path_on_its_own_flags():
    """The user's line, its flags changing the processor (a smaller max_pixels than the example's): the
    served prompt is compared with vLLM's processor run with the same flags, so it agrees, and has
    fewer tokens than the example's own line gives."""
    from vlcheck.served.launch_lines import check_line

    example = ("vllm serve Qwen/Qwen2-VL-7B-Instruct --max-model-len 4096 "
               """--limit-mm-per-prompt '{"image": 1}' --mm-processor-kwargs '{"min_pixels": 784, "max_pixels": %d}'""")
    counts = {}
    for max_pixels in (1003520, 12544):
        launch, served = check_line(example % max_pixels)
        if served.status.value == "skip":
            pytest.skip(f"not servable here: {served.reason}")
        assert launch.status.value == "pass", launch.reason
        assert served.status.value == "pass", (served.reason, served.details)
        assert "2 equal to the offline path with the line's flags" in served.reason and "not compared" not in served.reason, served.reason
        counts[max_pixels] = served.data["served_placeholders"]
    assert counts[12544] != counts[1003520], counts


def test_the_gpu_server_runs_the_vllm_this_python_imports_not_one_on_path(tmp_path, monkeypatch):
    """A `vllm` on PATH may be another environment's, or a script whose interpreter is gone (on a GPU
    runner, a bundle's bin/vllm named the build machine's Python and every served check's server failed)."""
    import importlib.util
    import sys
    from pathlib import Path

    from vlcheck.engine.engine_server import command, vllm_cli_entry

    stranger = tmp_path / "vllm"
    stranger.write_text("#!/nonexistent/python\n")
    stranger.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    argv = command("gpu", {"model": "/m"}, 8000, None)
    assert argv[0] == sys.executable and str(stranger) not in argv
    assert argv[argv.index("serve"):][:2] == ["serve", "/m"]
    module, function = vllm_cli_entry()
    assert Path(importlib.util.find_spec(module).origin).is_relative_to(Path(importlib.util.find_spec("vllm").origin).parent)
    # vLLM's CLI needs a platform (a GPU) to parse its arguments: the code is read, not run here
    compile(argv[2], "<vllm cli>", "exec")
    assert f"from {module} import {function}" in argv[2] and "sys.argv[0] = 'vllm'" in argv[2]


def test_engine_server_start_retries_a_lost_port_race(monkeypatch, tmp_path):
    """A server that exits because another process bound its port meanwhile starts again on a new
    port; any other failure is raised at once."""
    from vlcheck.engine import engine_server
    from vlcheck.served.server import ServerFailed

    ports, started = iter([41001, 41002, 41003]), []

    class Fake:
        ready_after_s = 1.0

        def __init__(self, argv, port, log, env, fails_with):
            self.argv, self.port, self.log, self.fails_with = argv, port, log, fails_with

        def wait_ready(self, timeout_s):
            if self.fails_with:
                self.log.write_text(self.fails_with)
                raise ServerFailed(f"the server exited before it was ready; its log {self.log}:\n...", self.log)
            return self

        def stop(self):
            pass

    def start_command(argv, port, log, env, failures):
        started.append(port)
        return Fake(argv, port, log, env, failures[len(started) - 1])

    monkeypatch.setattr(engine_server, "free_port", lambda: next(ports))
    monkeypatch.setattr(engine_server, "command", lambda platform, args, port, template: ["vllm", "serve", str(port)])
    monkeypatch.setattr(engine_server, "environment", lambda platform, args: {})
    lost = "OSError: [Errno 98] Address already in use"
    monkeypatch.setattr(engine_server, "start_command",
                        lambda argv, port, log, env: start_command(argv, port, log, env, [lost, ""]))
    server = engine_server.start("gpu", {}, None)
    assert started == [41001, 41002] and server.server.port == 41002

    started.clear()
    monkeypatch.setattr(engine_server, "start_command",
                        lambda argv, port, log, env: start_command(argv, port, log, env, ["CUDA out of memory"]))
    with pytest.raises(ServerFailed):
        engine_server.start("gpu", {}, None)
    assert started == [41003]


def test_a_served_declaration_excuses_only_the_problem_lines_it_names():
    """The engine tier's served tests write their problems in the render server check's words and hold
    them to the family-config's `served` declaration: every line named, or none excused."""
    import dataclasses

    from vlcheck.served.checks import declared_for, known_uuid_rejected

    audio = next(v for v in get_family("qwen2_5_omni").variants if v.kind == "audio")
    rejected = known_uuid_rejected(500, "Expected code to be unreachable, but got: None")
    assert rejected.startswith("uuid: empty parts with known uuids rejected: 500")
    declared = audio.deviation("served")
    if declared is None:
        pytest.skip("qwen2_5_omni [audio]'s served declaration does not apply to these versions")
    assert declared_for(audio, [rejected]) is declared
    assert declared_for(audio, [rejected, "media fault 'audio: served as is': another answer (...)"]) is None
    assert declared_for(audio, []) is None
    unnamed = dataclasses.replace(declared, findings=())
    blanket = dataclasses.replace(audio, deviations={**audio.deviations, "served": unnamed})
    assert blanket.deviation("served") is unnamed and declared_for(blanket, [rejected]) is None
