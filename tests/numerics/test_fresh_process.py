"""transformers work apart from vLLM (vlcheck/core/fresh_process.py): where vLLM is loaded, the
function runs in a spawned child, whose exceptions reach the caller."""

import os
import sys

import pytest

from vlcheck.core import fresh_process


def test_runs_here_without_vllm_and_in_a_child_with_it(monkeypatch):
    monkeypatch.delitem(sys.modules, fresh_process.VLLM_PATCHES_TRANSFORMERS, raising=False)
    assert fresh_process.call_apart_from_vllm(os.getpid) == os.getpid()
    monkeypatch.setitem(sys.modules, fresh_process.VLLM_PATCHES_TRANSFORMERS, object())
    assert fresh_process.call_apart_from_vllm(os.getpid) != os.getpid()


def test_a_childs_exception_is_raised_here():
    with pytest.raises(FileNotFoundError):
        fresh_process.call(os.stat, "/no/such/path")
