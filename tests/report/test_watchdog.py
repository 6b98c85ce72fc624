"""The engine watchdog on CPU, with stand-ins for vLLM's LLM: an engine process that dies by
SIGFPE under a request that waits forever (vLLM 0.24.0's client does), a start that never ends,
a call that hangs. Each must end in seconds with the cause and the engine's last words."""

import multiprocessing
import queue
import signal
import time

import pytest

from vlcheck.engine.watchdog import EngineDied, Watchdog, Watched, exit_code, exit_description

DIES = ("import os, sys, signal, time; print('engine core: ready', flush=True); "
        "sys.stderr.write('engine core: get_scheduler_metadata(headdim=0)\\n'); sys.stderr.flush(); "
        "time.sleep({after}); os.kill(os.getpid(), signal.SIGFPE)")


class StandInLLM:
    """Starts an engine process (spawned, like vLLM's) and waits on a queue nobody fills."""

    def __init__(self, code: str, start_s: float = 0.0):
        self.process = multiprocessing.get_context("spawn").Process(target=exec, args=(code,), name="EngineCore_DP0")
        self.process.start()
        time.sleep(start_s)
        self.outputs = queue.Queue()

    def generate(self, prompts):
        return self.outputs.get()  # what vLLM's get_output does: no timeout

    def get_metrics(self):
        return []


@pytest.fixture
def watchdog(tmp_path, monkeypatch):
    monkeypatch.setenv("VLCHECK_ENGINE_LOGS", str(tmp_path))
    dog = Watchdog("standin-single")
    yield dog
    dog.stop(kill=True)


def test_an_engine_dying_under_a_request_ends_it_with_the_signal_and_last_words(watchdog):
    with watchdog.starting():
        llm = Watched(StandInLLM(DIES.format(after=1.0)), watchdog)
    start = time.monotonic()
    with pytest.raises(EngineDied) as died:
        llm.generate(["a prompt"])
    assert time.monotonic() - start < 10
    message = str(died.value)
    assert "EngineCore_DP0" in message and "killed by SIGFPE (exit code -8)" in message and "LLM.generate" in message
    assert "get_scheduler_metadata(headdim=0)" in message  # the engine's own stderr, from its log
    with pytest.raises(EngineDied):  # the next call is told at once
        llm.get_metrics()


def test_a_start_that_never_ends_is_stopped_at_its_limit(watchdog):
    start = time.monotonic()
    with pytest.raises(EngineDied, match="no answer from the engine during start"):
        with watchdog.starting(timeout=2):
            StandInLLM(DIES.format(after=60), start_s=30)
    assert time.monotonic() - start < 15


def test_a_hung_call_is_stopped_at_its_limit(watchdog):
    with watchdog.starting():
        llm = StandInLLM(DIES.format(after=60))
    start = time.monotonic()
    with pytest.raises(EngineDied, match="no answer from the engine during a slow call: it hangs"):
        with watchdog.call("a slow call", timeout=1):
            llm.generate(["a prompt"])
    assert time.monotonic() - start < 10


def test_a_healthy_engine_answers_through_the_watch(watchdog):
    with watchdog.starting():
        stand_in = StandInLLM(DIES.format(after=60))
    stand_in.outputs.put("an answer")
    assert Watched(stand_in, watchdog).generate(["a prompt"]) == "an answer"
    assert watchdog.dead is None


def test_exit_codes_are_named():
    assert exit_description(-signal.SIGFPE) == "killed by SIGFPE (exit code -8)"
    assert exit_description(1) == "exited with code 1" and exit_description(None) == "still running"


class ReapedElsewhere:
    """A process another thread has reaped but not yet stored the code of (vLLM's monitor joining
    its engine core): `exitcode` reads None for a while, then the code."""

    def __init__(self, code_after_s: float):
        self.ready_at = time.monotonic() + code_after_s

    def join(self, timeout=None):
        pass

    @property
    def exitcode(self):
        return -signal.SIGFPE if time.monotonic() >= self.ready_at else None


def test_an_exit_code_reaped_by_another_thread_is_waited_for():
    # CI, stop 44: "EngineCore_DP0 ... still running during LLM.generate" for a process killed by SIGFPE
    assert exit_description(exit_code(ReapedElsewhere(0.3))) == "killed by SIGFPE (exit code -8)"
    assert exit_description(exit_code(ReapedElsewhere(60), within=0.2), exited=True).startswith("exited")


def test_a_process_started_after_the_engine_is_not_the_engine(watchdog):
    """A transformers reference run in a fresh child (core.fresh_process) ends normally: the engine
    lives on (the CPU engine tier once declared it dead: "the engine's process SpawnProcess-2 exited")."""
    with watchdog.starting():
        llm = Watched(StandInLLM("import time; time.sleep(60)"), watchdog)
    later = multiprocessing.get_context("spawn").Process(target=exec, args=("import time; time.sleep(0.6)",))
    later.start()
    time.sleep(1.5)  # the watching thread polls every 0.2 s: it saw the child live and end
    later.join()
    assert watchdog.dead is None
    llm.process.kill()


class EngineDeadError(RuntimeError):
    """vLLM's name for it: an AsyncLLM raises it from the request when its engine core has died."""


class StandInAsyncFace(StandInLLM):
    """The shared engine's face: it learns of the death from vLLM and raises, before the process is reaped."""

    def generate(self, prompts):
        self.process.join()
        raise EngineDeadError("EngineCore encountered an issue. See stack trace (above) for the root cause.")


def test_an_engine_death_reported_by_vllm_first_is_still_the_death(watchdog):
    # deepseek_vl_v2's declared SIGFPE through the shared engine on an H100: 4 errors (EngineDeadError from the
    # first request) where its xfail belonged, because vLLM said it before the watchdog saw the process exit
    with watchdog.starting():
        face = Watched(StandInAsyncFace(DIES.format(after=1.0)), watchdog)
    with pytest.raises(EngineDied) as died:
        face.generate(["a prompt"])
    assert "killed by SIGFPE" in str(died.value) and isinstance(died.value.__cause__, EngineDeadError)


def test_a_request_error_of_a_live_engine_stays_the_requests(watchdog):
    with watchdog.starting():
        stand_in = StandInLLM(DIES.format(after=60))

    def refuses(prompts):
        raise ValueError("the prompt is too long")

    stand_in.generate = refuses
    start = time.monotonic()
    with pytest.raises(ValueError, match="too long"):
        Watched(stand_in, watchdog).generate(["a prompt"])
    assert time.monotonic() - start < 1 and watchdog.dead is None  # no wait for a death that did not happen
