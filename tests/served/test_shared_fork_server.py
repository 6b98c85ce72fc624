"""The workers of `vlcheck check -j` share the parent's render fork server (vLLM imported once, not
once per worker), asking it over its Unix socket (`served.server.SHARED_ENV`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlcheck.served import render
from vlcheck.served.server import SHARED_ENV, RenderForkServer, Server, ServerFailed, free_port
from vlcheck.spec.registry import get_family

ASK = ("import json, sys; from pathlib import Path; from vlcheck.served.server import RenderForkServer; "
       "f = RenderForkServer.for_this_process(); s = f.start(json.loads(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])); "
       "print(json.dumps({'pid': s.pid, 'owner': f.owner}))")


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's parent from Linux's /proc")
def test_a_process_given_the_socket_asks_that_fork_server(tmp_path):
    spec = get_family("qwen2_vl")
    owner = render.fork_server()  # this worker's, which the served tests use too
    if not owner.owner:
        pytest.skip(f"{SHARED_ENV} is set here: this process is itself a client")
    try:
        line = render.spec_launch_line(spec, spec.single, tmp_path)
    except render.NotServable as err:  # a new user's empty HF cache: no chat template to serve with
        pytest.skip(str(err))
    owner.launch()
    port = free_port()
    argv = [line.model_dir, *line.flags, "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "server.log"
    asked = subprocess.run([sys.executable, "-c", ASK, json.dumps(argv), str(port), str(log)],
                           env={**os.environ, SHARED_ENV: str(owner.address)}, capture_output=True, text=True,
                           timeout=300)
    assert asked.returncode == 0, asked.stderr[-2000:]
    reply = json.loads(asked.stdout)
    assert reply["owner"] is False  # it started no fork server (no import of vLLM) of its own
    server = Server(["vllm", "launch", "render", *argv], port, log, reply["pid"])
    try:
        assert _parent_of(server.pid) == owner._process.pid
        server.wait_ready()
    finally:
        server.stop(graceful=False)


def test_a_fork_server_that_is_gone_is_named_not_waited_for(tmp_path):
    gone = RenderForkServer(address=tmp_path / "fork-server.sock")
    with pytest.raises(ServerFailed, match="did not answer"):
        gone.start(["model"], free_port(), tmp_path / "server.log")
