"""A served chat completion in goldens' form: the one reader of an OpenAI answer that every served
check (the served engine tests, `load`, `video_file`) compares against an offline engine's goldens.

The request must ask for logprobs with `return_tokens_as_token_ids` (so a token is "token_id:123",
never a string the tokenizer might map back otherwise); logprobs keep `goldens.LOGPROB_DECIMALS`,
as the offline side's do, so a served answer and an offline one differ only by what the engines did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlcheck.engine.goldens import LOGPROB_DECIMALS


def token_id(token: str) -> int:
    return int(token.rpartition(":")[2])  # "token_id:123"


def as_golden(body: Mapping[str, Any] | Any) -> dict[str, Any]:
    """A chat completion (the JSON body, or the `openai` client's object) as
    {prompt_tokens, token_ids, top_logprobs: [{id: logprob}], text}, plus `prompt_token_ids`
    where the request asked `return_token_ids`."""
    if not isinstance(body, Mapping):
        body = body.model_dump()
    choice = body["choices"][0]
    content = (choice.get("logprobs") or {}).get("content") or []
    golden = {"prompt_tokens": body["usage"]["prompt_tokens"],
              "token_ids": [token_id(c["token"]) for c in content],
              "top_logprobs": [{str(token_id(t["token"])): round(float(t["logprob"]), LOGPROB_DECIMALS)
                                for t in c["top_logprobs"]} for c in content],
              "text": choice["message"].get("content") or ""}
    if body.get("prompt_token_ids") is not None:
        golden["prompt_token_ids"] = body["prompt_token_ids"]
    return golden
