"""Chat templates the way vLLM serves them: its fallback templates, its content-format detection,
and transformers' Jinja renderer."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from vlcheck.adapter.generations import single_generation


def chat_template_fallback(model_type: str, model: str) -> Path | None:
    """The chat template vLLM falls back to for a model type without one of its own."""
    # vllm 0.24, 0.32: vllm.transformers_utils.chat_templates.registry
    from vllm.transformers_utils.chat_templates.registry import get_chat_template_fallback_path

    return get_chat_template_fallback_path(model_type, model)


@lru_cache(maxsize=None)
def content_format_generation() -> str:
    # _detect_content_format(template, default=...)
    return single_generation("chat content format", "vllm.renderers.hf", "_detect_content_format", "vllm 0.24, 0.32")


def chat_template_content_format(chat_template: str) -> str:
    """`"string"` or `"openai"`: whether vLLM sends this template string content or typed parts
    (vLLM inspects the template's Jinja AST for loops over `message['content']`)."""
    content_format_generation()
    from vllm.renderers.hf import _detect_content_format

    return _detect_content_format(chat_template, default="string")


def render_chat_template(messages: list[dict], chat_template: str, special_tokens: dict[str, str]) -> str:
    """One conversation rendered by transformers' Jinja renderer, with the generation prompt."""
    # transformers 5.16, 5.19: transformers.utils.chat_template_utils.render_jinja_template
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[messages], chat_template=chat_template,
                                        add_generation_prompt=True, **special_tokens)
    return rendered[0]
