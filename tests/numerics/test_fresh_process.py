"""transformers work apart from vLLM (vlcheck/core/fresh_process.py): where vLLM is loaded, the
function runs in a spawned child, whose exceptions reach the caller."""

import os
import sys
import types

import pytest

from vlcheck.core import fresh_process


def test_runs_here_unless_vllm_patched_a_transformers_class(monkeypatch):
    monkeypatch.delitem(sys.modules, fresh_process.VLLM_PATCHES_TRANSFORMERS, raising=False)
    assert fresh_process.call_apart_from_vllm(os.getpid) == os.getpid()

    wrapper = type("TorchCompileWithNoGuardsWrapper", (), {"__module__": "vllm.compilation.wrapper"})
    decorators = types.ModuleType(fresh_process.VLLM_PATCHES_TRANSFORMERS)
    decorators.TorchCompileWithNoGuardsWrapper = wrapper
    monkeypatch.setitem(sys.modules, fresh_process.VLLM_PATCHES_TRANSFORMERS, decorators)
    type("LlamaModel", (wrapper,), {"__module__": "vllm.model_executor.models.llama"})
    assert fresh_process.call_apart_from_vllm(os.getpid) == os.getpid()  # vLLM's own classes only

    module = "transformers.models.cohere2.modeling_cohere2"
    base = type("Cohere2PreTrainedModel", (), {"__module__": module})
    patched = type("Cohere2Model", (base,), {"__module__": module})
    patched.__bases__ = patched.__bases__ + (wrapper,)  # what vllm.compilation.decorators does
    assert fresh_process.vllm_patched_transformers()
    assert fresh_process.call_apart_from_vllm(os.getpid) != os.getpid()


def test_a_childs_exception_is_raised_here():
    with pytest.raises(FileNotFoundError):
        fresh_process.call(os.stat, "/no/such/path")
