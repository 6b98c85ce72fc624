"""`spec_ngram`: vLLM's n-gram speculative decoding (prompt lookup: no draft model), as users turn it
on for long, repetitive answers. Greedy speculation must not change an answer: the example's requests
are held to this run's eager engine (same build, versions and device) within the noise stored with
the eager golden, plus the media-sensitivity test. Proof: vLLM's own counters of the requests,
`vllm:spec_decode_num_draft_tokens` and `vllm:spec_decode_num_accepted_tokens`: a run in which no
draft token was accepted never took the path where speculation could change an answer, and skips.
"""

from __future__ import annotations

from vlcheck.configurations.offline import against_eager, generation, sees_media
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.engine.engines import metric_sums
from vlcheck.spec.schema import FamilySpec, Variant

HELD_TO_EAGER_ENGINE = True
COUNTERS = {"drafts": "vllm:spec_decode_num_drafts", "draft_tokens": "vllm:spec_decode_num_draft_tokens",
            "accepted_tokens": "vllm:spec_decode_num_accepted_tokens"}


def counters(llm) -> dict[str, float]:
    """vLLM's speculative-decoding counters, summed over engines."""
    return metric_sums(llm, COUNTERS)


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    measured = Measured(reference="this run's eager engine")
    before = counters(handle.llm)
    runs = generation(spec, variant, handle, measured)
    during = {k: v - before[k] for k, v in counters(handle.llm).items()}
    against_eager(spec, variant, handle, runs, measured, config)
    sees_media(spec, variant, handle, measured)
    measured.proof = {k: int(v) for k, v in during.items()}
    if during["accepted_tokens"] <= 0:
        measured.not_exercised = (f"no draft token was accepted in the example's requests ({int(during['draft_tokens'])} "
                                  "proposed): no answer took the path where speculation could change it")
    return measured
