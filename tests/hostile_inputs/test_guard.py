"""The guard the hostile cases run under: one child for a batch of calls, each with its own
deadline and memory allowance; a call that fails, hangs or dies ends its child, and the calls
after it still run, in a fresh one."""

import os
import signal
import time

from vlcheck.hostile.guard import ChildError, Hang, OverMemory, guarded, guarded_calls


def _fail():
    raise ValueError("bad input")


def test_results_come_back_in_order_and_a_failure_ends_its_child():
    results = guarded_calls([os.getpid, os.getpid, _fail, os.getpid], timeout_s=30, memory_gb=1)
    (first, e1), (second, e2), (_, failure), (after, e4) = results
    assert e1 is e2 is e4 is None
    assert first == second != os.getpid()  # one child ran the batch, not this process
    assert isinstance(failure, ChildError) and (failure.name, str(failure)) == ("ValueError", "bad input")
    assert after not in (first, os.getpid())  # the call after a failure ran in a fresh child


def test_a_hanging_call_is_killed_at_its_deadline_and_the_next_one_runs():
    start = time.monotonic()
    (_, hang), (pid, error) = guarded_calls([lambda: time.sleep(30), os.getpid], timeout_s=1, memory_gb=1)
    assert isinstance(hang, Hang) and str(hang) == "no answer after 1 s"
    assert error is None and pid != os.getpid()
    assert time.monotonic() - start < 10


def test_a_call_over_its_memory_allowance_is_stopped():
    results = guarded_calls([lambda: len(bytearray(2 << 30)), lambda: len(bytearray(1 << 20))], timeout_s=30, memory_gb=1)
    (_, over), (size, error) = results
    assert isinstance(over, OverMemory) and str(over) == "needs more than 1 GB of memory"
    assert (size, error) == (1 << 20, None)


def test_a_child_that_dies_counts_as_over_memory():
    (_, died), (pid, error) = guarded_calls([lambda: os.kill(os.getpid(), signal.SIGKILL), os.getpid],
                                            timeout_s=30, memory_gb=1)
    assert isinstance(died, OverMemory) and str(died) == "the process died (needs more than 1 GB?)"
    assert error is None


def test_guarded_raises_what_the_call_raised():
    try:
        guarded(_fail, timeout_s=30, memory_gb=1)
    except ChildError as err:
        assert err.cause_name == "ValueError" and "ValueError" in err.cause_mro
    else:
        raise AssertionError("guarded returned although the call raised")
    assert guarded(lambda: 42, timeout_s=30, memory_gb=1) == 42
