"""vLLM against the transformers reference, on the seeded synthetic checkpoint: the same requests
(`vlcheck.numerics.reference.requests`), greedy, compared by vLLM's own rule (`check_logprobs_close`, here
`goldens.logprobs_close`) with the CPU reference in `vlcheck/snapshots/test_reference/`; float32 on both sides, or
bfloat16 where vLLM refuses float32. And the engine's output must see the media."""

import pytest

from vlcheck.runners.testing import assert_as_scoped, modality_of
from vlcheck.engine import goldens
from vlcheck.numerics import reference
from vlcheck.spec.schema import config_id

pytestmark = [pytest.mark.engine, pytest.mark.sends("image", "video", "audio")]  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin


def _requests_or_skip(family, variant):
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        return reference.requests(family, variant)
    except TemplateUnavailable as err:
        pytest.skip(f"{family.name}: the example renders with the model's chat template: {err}")


def test_vllm_matches_transformers_reference(family, variant, seeded_engine, request):
    """A declared `vllm_reference` deviation covers its modalities only: the others still compare."""
    handle, dtype = seeded_engine
    stored = reference.load(config_id(family, variant))
    if stored is None:
        pytest.skip(f"{family.name}: no transformers reference recorded (tests/numerics/test_cpu_reference.py)")
    actual = [reference.vllm_first_step(handle.llm, r) for r in _requests_or_skip(family, variant)]
    expected = stored["runs"]
    problems = {}
    for run, a in zip(expected, actual):
        found = [p if p.startswith(f"{run['shape']}:") else f"{run['shape']}: {p}"
                 for p in reference.disagreement(run, a, dtype)]
        problems.setdefault(modality_of(run["shape"]), []).extend(found)
        # the measured distance between two implementations: one input of goldens.NOISE_TOLERANCE
        request.node.user_properties.append((f"transformers_distance {run['shape']}",
                                             goldens.largest_difference([run], [a])))
    request.node.user_properties.append(("vllm", {r["shape"]: a["token_ids"] for r, a in zip(expected, actual)}))
    assert_as_scoped(request, variant, "vllm_reference", problems,
                     f"{family.name} ({dtype}): vLLM disagrees with transformers {stored['transformers']} "
                     f"on the same seeded weights:")


def test_vllm_output_sees_the_media(family, variant, seeded_engine, request):
    """Other media (same size) move the first-step top-5 logprobs; the same request again does not
    (beyond the logprobs' rounding, `reference.REPEAT_RESOLUTION`)."""
    handle, _ = seeded_engine
    problems = []
    for r in _requests_or_skip(family, variant):
        first = reference.vllm_first_step(handle.llm, r, new_tokens=1)["top_logprobs"][0]
        other = reference.vllm_first_step(handle.llm, r, r.other_items, new_tokens=1)["top_logprobs"][0]
        again = reference.vllm_first_step(handle.llm, r, new_tokens=1)["top_logprobs"][0]
        moved = reference.top_change(first, other)
        request.node.user_properties.append((f"sensitivity {r.shape}", moved))
        if moved < reference.SENSITIVITY_MIN:
            problems.append(f"{r.shape}: other media move the first-step top-5 logprobs by {moved} nats")
        if reference.repeat_moved(first, again):
            problems.append(f"{r.shape}: the same request twice gives {first} then {again}")
    assert not problems, f"{family.name}: " + "\n".join(problems)
