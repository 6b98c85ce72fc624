"""Each example against its model's own files from the HF cache: chat template and stop tokens.

Skips name the missing file; nothing goes online when HF_HUB_OFFLINE=1 (CI).
"""

import pytest

from vlcheck.core.results import Status
from vlcheck.runners.testing import baseline_of, require_ok, run_check
from vlcheck.prompt.conformance import hub_document, stop_conformance, template_conformance


def test_hand_prompt_matches_chat_template(family, variant, request):
    result = run_check(request, "template", family, variant)
    if result is not None:  # None: compared with --vlcheck-baseline
        require_ok(result, variant)


def test_stop_tokens_resolve(family, variant, request):
    result = run_check(request, "stops", family, variant)
    if result is not None:
        require_ok(result, variant)


def test_hub_conformance_snapshot(family, variant, family_snapshot, request):
    if baseline_of(request.config) is not None:
        pytest.skip("--vlcheck-baseline: the template and stops checks compare their facts with the baseline")
    template, stops = template_conformance(family, variant), stop_conformance(family, variant)
    if template.status is Status.SKIP and stops.status is Status.SKIP:
        pytest.skip(f"{template.reason}; {stops.reason}")
    assert family_snapshot == hub_document(family, variant, template, stops), (
        f"{family.name} [{variant.kind}] template/stops: the rendering against the model's files differs from the "
        "snapshot (diff below)")
