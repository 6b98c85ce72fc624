"""One engine per family-config for the offline and the served checks: vLLM's `AsyncLLM`, built
from a `vllm serve` command line, with vLLM's own OpenAI app served by uvicorn on 127.0.0.1 in a
thread of the test process, and an `LLM`-like face (`generate`, `chat`, `apply_model`,
`get_metrics`, ...) for the offline checks on the same engine.

Why: a served family-config used to start a second engine (`vllm serve`) beside the offline one,
and on one H100 the default GPU run with the served checks did not fit 10 minutes (226-376 s per
served family-config against 65-200 s, issue 38). Here the served checks cost one app on the engine
the offline checks already started, and no second import of vLLM.

The command line is parsed by vLLM's own `vllm serve` parser (`make_arg_parser`), and the engine
and app are made by the functions `vllm serve` calls (`build_async_engine_client`, `build_app`,
`init_app_state`): what differs from `vllm serve` is only the process it runs in and uvicorn's
signal handling (none off the main thread).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlcheck.engine.serve_flags import SERVED_NAME, flags

__all__ = ["SharedEngine", "command_line"]

READY_TIMEOUT_S = 600.0


def command_line(engine_args: dict[str, Any], port: int, chat_template: Path | None) -> list[str]:
    """`vllm serve MODEL FLAGS` for these engine args, as `engine_server.command` writes it."""
    line = ["vllm", "serve", str(engine_args["model"]), "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", SERVED_NAME, *flags(engine_args)]
    return line + (["--chat-template", str(chat_template)] if chat_template is not None else [])


@dataclass
class _Server:
    """What the served tests read of a server (as `engine_server.EngineServer`): URL, start time, log."""

    url: str
    start_seconds: float
    log: Path
    argv: list[str]
    owner: "SharedEngine"

    def alive(self) -> bool:
        return self.owner.alive()

    def log_tail(self, lines: int = 20) -> str:
        from vlcheck.engine.watchdog import last_words

        return last_words(self.log) if self.log.exists() else "(no log)"

    def stop(self) -> None:
        """The engine's owner (the engine cache) stops it, not the served tests."""


class SharedEngine:
    """A started AsyncLLM with its OpenAI app; `LLM`-like methods for the offline checks."""

    def __init__(self, engine_args: dict[str, Any], chat_template: str | None, log: Path):
        self.engine_args = engine_args
        folder = Path(log).parent
        self.template_path = None
        if chat_template is not None:
            self.template_path = folder / f"{Path(log).stem}-chat_template.jinja"
            self.template_path.write_text(chat_template)
        # bound now and held until uvicorn serves on it, as `vllm serve` does: a port chosen free and let go
        # was taken by another family-config's engine during the minute this one took to start (minicpmv, H100)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.argv = command_line(engine_args, self.port, self.template_path)
        self._log = Path(log)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vlcheck-shared-engine", daemon=True)
        self._stack = AsyncExitStack()
        self._ids = itertools.count()
        self.engine = None
        self._uvicorn = None
        self._serving = None
        self.server: _Server | None = None

    # --- life ----------------------------------------------------------------------------------

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> "SharedEngine":
        began = time.perf_counter()
        self._thread.start()
        try:
            self._run(self._start(), timeout_s)
        except BaseException:
            self.shutdown()  # an engine core started before the app failed must not outlive it
            raise
        self.server = _Server(f"http://127.0.0.1:{self.port}", time.perf_counter() - began, self._log, self.argv, self)
        return self

    async def _start(self) -> None:
        import uvicorn
        from vlcheck.adapter.serve_args import parse_on_this_platform
        from vlcheck.adapter.shared_engine import app_builders, fresh_media_connection

        fresh_media_connection()  # made again in this engine's loop at its first http media URL
        vllm = app_builders()
        args = parse_on_this_platform(self.argv[2], self.argv[3:])
        self.engine = await self._stack.enter_async_context(vllm.build_async_engine_client(args))
        tasks = await self.engine.get_supported_tasks()
        app = vllm.build_app(args, tasks, self.engine.model_config)
        await vllm.init_app_state(self.engine, app.state, args, tasks)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
                                timeout_keep_alive=5)
        self._uvicorn = uvicorn.Server(config)
        self._serving = asyncio.get_running_loop().create_task(self._uvicorn.serve(sockets=[self._socket]))
        while not self._uvicorn.started:
            if self._serving.done():
                self._serving.result()  # raises what stopped it (e.g. the port taken)
                raise RuntimeError("uvicorn stopped before serving")
            await asyncio.sleep(0.05)

    def alive(self) -> bool:
        engine = self.engine
        return (self._thread.is_alive() and engine is not None and not getattr(engine, "errored", False)
                and self._serving is not None and not self._serving.done())

    def shutdown(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._run(self._stop(), 60)
        except Exception:  # noqa: BLE001 - a dead engine is what we want either way
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._socket.close()

    async def _stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            await asyncio.wait_for(self._serving, 20)
        await self._stack.aclose()  # AsyncLLM.shutdown(): its engine core process ends

    def _run(self, coroutine, timeout_s: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    # --- LLM's face ----------------------------------------------------------------------------

    @property
    def llm_engine(self):
        """`llm.llm_engine.vllm_config` reads the engine's config, as on an `LLM`."""
        return self.engine

    @property
    def vllm_config(self):
        return self.engine.vllm_config

    def get_tokenizer(self):
        return self.engine.get_tokenizer()

    def get_metrics(self):
        from vlcheck.adapter.shared_engine import metrics_snapshot

        return metrics_snapshot()

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        return self._run(self.engine.collective_rpc(method, timeout, args, kwargs))

    def apply_model(self, func):
        return self.collective_rpc("apply_model", args=(func,))

    def generate(self, prompts, sampling_params=None, *, use_tqdm=False, lora_request=None, **_):
        """As `LLM.generate`: the outputs in the prompts' order. Each prompt goes through the
        renderer as `LLM.generate`'s does (`adapter.shared_engine`), then to the engine."""
        from vlcheck.adapter.shared_engine import render_prompts

        prompts = [prompts] if isinstance(prompts, (str, dict)) else list(prompts)
        rendered = render_prompts(self.engine, prompts)
        return self._generate(rendered, sampling_params, lora_request)

    def chat(self, messages, sampling_params=None, *, use_tqdm=False, chat_template=None, lora_request=None, **_):
        """As `LLM.chat` for one conversation or several."""
        from vlcheck.adapter.shared_engine import render_chats

        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        rendered = render_chats(self.engine, conversations, chat_template)
        return self._generate(rendered, sampling_params, lora_request)

    def _generate(self, rendered: list, sampling_params, lora_request) -> list:
        from vllm import SamplingParams

        from vlcheck.adapter.shared_engine import final_output_only

        params = (list(sampling_params) if isinstance(sampling_params, (list, tuple))
                  else [sampling_params or SamplingParams()] * len(rendered))
        loras = list(lora_request) if isinstance(lora_request, (list, tuple)) else [lora_request] * len(rendered)

        async def one(prompt, sp, lora):
            final = None
            async for out in self.engine.generate(prompt, final_output_only(sp), f"vlcheck-offline-{next(self._ids)}", lora_request=lora):
                final = out
            return final

        async def every():
            return await asyncio.gather(*(one(p, sp, lora) for p, sp, lora in zip(rendered, params, loras)))

        return self._run(every())
