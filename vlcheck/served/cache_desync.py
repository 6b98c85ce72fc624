"""A request rejected after its media entered the API process's processor cache, then resent by uuid.

vLLM's API process keeps a processor cache that mirrors the engine's: an item it has sent once is
sent again as its hash alone. A request whose image was processed (and cached) but which is then
rejected before it reaches the engine, here for a prompt longer than the model's context with its
media (and within it without: a prompt too long as text is rejected before processing), leaves
the API side believing the engine holds an item it never got. Resent by uuid with an empty part,
the item must be served (the right answer: the same as the request with its image) or refused with
a 4xx; a 500 or an engine that dies is the desync vLLM users met as a dead server.
"""

from __future__ import annotations

from typing import Any, Callable

from vlcheck.served.bad_requests import BadRequest, Outcome, classify, normalized
from vlcheck.served.client import Reply
from vlcheck.served.requests import data_url, items, media_part
from vlcheck.spec.schema import Declaration, Variant

POISONED_UUID_500 = Declaration(
    reason="vLLM answers 500 ('Internal server error'; the log: 'failed with an internal error during generation') "
           "to a request naming by uuid an item whose earlier request was rejected after its media was processed "
           "(400 'Input length (4127) exceeds model's maximum context length (4096)', raised by get_max_tokens after "
           "the API process's processor cache took the item): the API side sends the item as cached, the engine never "
           "got it. On 0.24.0 the uuid stays poisoned (the request with the media and that uuid is answered 500 too); "
           "on 0.32.0 that request is served. The same media without a uuid, and the server, are served on both. Measured on vLLM's CPU build 0.24.0 (transformers "
           "5.16.1) and 0.32.0 (5.19.0), qwen2_vl-single and llava-single, 2026-11-29; the API code is every build's",
    vllm=">=0.24.0,<=0.32.0", transformers=">=5.16.1,<=5.19.0")

CASE = BadRequest("rejected after its media was processed (prompt too long), then resent by uuid",
                  lambda v, m, limit: None, may_accept=True, known_server_error=POISONED_UUID_500)
TIMEOUT_S = 120.0
WORD = "word"


class NotArranged(RuntimeError):
    """No text length puts the request past the context with its media and inside it without."""


def _messages(part: dict, text: str) -> list[dict]:
    return [{"role": "user", "content": [part, {"type": "text", "text": text}]}] if part else \
        [{"role": "user", "content": [{"type": "text", "text": text}]}]


def padded_text(count: Callable[[list], int | None], part: dict, question: str, max_model_len: int) -> str:
    """A question padded with words so that the prompt without its media fits `max_model_len` and with it
    does not: vLLM then rejects it only after processing the media (a prompt too long as text alone is
    rejected before, and its item never enters the cache). `count(messages)`: the server's prompt length."""
    with_media, text_only = count(_messages(part, question)), count(_messages({}, question))
    if with_media is None or text_only is None or with_media <= text_only:
        raise NotArranged(f"the server did not count the prompt's tokens (with media {with_media}, without {text_only})")
    media_tokens = with_media - text_only
    target = max_model_len - media_tokens // 2
    words = max(target - text_only, 1)
    for _ in range(4):  # a word is some tokens (3 in a synthetic checkpoint's tokenizer): scaled by what the server counts
        text = f"{' '.join([WORD] * words)} {question}"
        alone = count(_messages({}, text))
        if alone is None:
            raise NotArranged("the server did not count the padded prompt")
        if alone < max_model_len and alone + media_tokens > max_model_len:
            return text
        per_word = max(alone - text_only, 1) / words
        words = max(int((target - text_only) / per_word), 1)
    raise NotArranged(f"no padding put the prompt between {max_model_len - media_tokens} and {max_model_len} tokens "
                      f"without its {media_tokens} media tokens")


def run(send: Callable[[list, float], Reply], count: Callable[[list], int | None], fingerprint: Callable[[Reply], Any],
        variant: Variant, max_model_len: int, question: str, uuid: str) -> tuple[Outcome, Outcome]:
    """(the over-long request's outcome: it must be a 4xx; the uuid resend's: the right answer or a 4xx).
    Raises NotArranged where no such request can be made."""
    modality = variant.primary_modality
    url = data_url(modality, items(variant, modality, 1)[0])
    part = media_part(modality, url, uuid)
    text = padded_text(count, media_part(modality, url), question, max_model_len)
    rejected = send(_messages(part, text), TIMEOUT_S)
    first = classify(BadRequest("the over-long request with the media and its uuid", lambda v, m, limit: None), rejected)
    if rejected.status is not None and 200 <= rejected.status < 300:
        first.failure = f"answered {rejected.status}: the prompt is longer than max_model_len {max_model_len}"
    resent = send(_messages(media_part(modality, None, uuid), question), TIMEOUT_S)
    second = classify(CASE, resent)
    right = send(_messages(part, question), TIMEOUT_S)  # after the resend: sent before, it would fill the engine's cache
    plain = send(_messages(media_part(modality, url), question), TIMEOUT_S)
    known = "(known on" in second.summary
    if not plain.ok:
        second.valid_after = f"the same media without a uuid: {plain.status} {normalized(plain.message)}"
        second.failure = "the server no longer serves the example's media (a dead engine?)"
    elif not right.ok:
        second.valid_after = f"{right.status} {normalized(right.message)}" + (" (the same uuid, known)" if known else "")
        if not known:
            second.failure = second.failure or "the same request with its media and uuid is no longer served"
    elif resent.ok:
        if fingerprint(resent) != fingerprint(right):
            second.summary = "accepted: ANOTHER ANSWER than the same request with its media"
            second.failure = "the uuid alone named another item than the media it was sent with"
        else:
            second.summary = "the right answer (the same as with its media)"
    return first, second
