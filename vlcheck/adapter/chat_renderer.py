"""vLLM's chat renderer in this process: what its servers run for a chat request before the
processor (the messages parsed, their media decoded, the chat template applied, the prompt
tokenized), built from a model config alone, with no server and no engine."""

from __future__ import annotations

from typing import Any

from vlcheck.adapter.processor import MODEL_CONFIG_ARGS


def create_chat_renderer(local_dir: str, engine_args: dict) -> Any:
    """The renderer `vllm serve` and `vllm launch render` build for this checkpoint and these
    engine args (vllm 0.24, 0.32, 0.33: vllm.renderers.renderer_from_config over a VllmConfig)."""
    from vllm.config import ModelConfig, VllmConfig
    from vllm.renderers import renderer_from_config

    from vlcheck.adapter.render_server import cpu_platform

    kwargs = {k: v for k, v in engine_args.items() if k in MODEL_CONFIG_ARGS}
    kwargs.setdefault("dtype", "bfloat16")
    with cpu_platform():
        return renderer_from_config(VllmConfig(model_config=ModelConfig(model=local_dir, tokenizer=local_dir, **kwargs)))


def render_chat(renderer: Any, messages: list[dict], chat_template: str | None) -> dict:
    """One chat request rendered: the prompt vLLM hands its processor (token ids and media)."""
    from vllm.renderers import ChatParams

    _, prompt = renderer.render_messages(messages, ChatParams(chat_template=chat_template))
    return prompt
