"""Processor fingerprints: the tensors vLLM's processor hands the model, per request shape, one line
per tensor (`vlcheck/snapshots/test_fingerprints/<config>.txt`): a preprocessing change names its tensor.
The catalogue's `fingerprints` check (fact `<variant>.fingerprints`)."""

import pytest

from vlcheck.core.results import Status
from vlcheck.runners.testing import assert_as_declared, fact_lines, run_check


def test_processor_fingerprints(family, variant, family_snapshot, request):
    result = run_check(request, "fingerprints", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    assert_as_declared(result, variant, declared_as="processor")
    if result.status is Status.DEVIATION:
        pytest.xfail(result.reason)
    header = [f"# tensors vLLM's processor hands the model: {family.name} [{variant.kind}] (synthetic checkpoint)"]
    assert "\n".join(header + fact_lines(result, variant, "fingerprints")) + "\n" == family_snapshot


def test_a_refused_item_count_leaves_the_other_counts_fingerprinted():
    """gemma3n's audio example writes one <audio_soft_token> for any number of clips: vLLM's processor
    refuses two clips (vLLM 0.24.0 and 0.33.0). The one clip is still fingerprinted, and the refusal is a
    finding line of its own, which the processor declaration names."""
    from vlcheck.numerics.fingerprint import fingerprints_check
    from vlcheck.spec.registry import get_family

    spec = get_family("gemma3n")
    audio = next(v for v in spec.variants if v.kind == "audio")
    result = fingerprints_check(spec, audio)
    if result.status is Status.SKIP:
        pytest.skip(result.reason)
    lines = result.data["audio.fingerprints"]
    assert result.status is Status.FAIL and result.details == [line for line in lines if line.startswith("audio x2: vllm raised")]
    assert lines[0].startswith("audio x1: ") and lines[0].endswith(" prompt tokens") and lines[1].startswith("  audio[0] ")
    assert audio.deviation("processor").covers_finding(result.details[0]) and result.frames
