"""The served path on CPU: each family-config served by `vllm launch render` (a real server on
127.0.0.1, the spec's engine args as `vllm serve` flags), its example's chat requests sent as
OpenAI chat completions. Served vs offline (vLLM's processor on the example's own prompt), the
snapshot of the served prompts and placeholder ranges, `/tokenize` against render, and the uuid
round trip (vlcheck/served/checks.py)."""

import json

from vlcheck.runners.testing import assert_as_declared, run_check
from vlcheck.served.render import served_record


def served_document(family, variant, result) -> str:
    """The snapshot: launch line, template, content format, then each request's served prompt
    (placeholder ranges as ⟦modality index: n tokens⟧) and its ranges, and the offline verdict."""
    record = served_record(family, variant)
    lines = [f"# served by vllm launch render (CPU): {family.name} [{variant.kind}]",
             f"launch: {record.line.portable_text()}",
             f"chat template: {record.line.template_source}; content format: {record.content_format}"]
    lines += [f"left out: {key} ({why})" for key, why in record.line.left_out.items()]
    for shape, served in record.renders.items():
        if not served.ok:
            lines.append(f"{shape}: rejected {served.reply_status}: {served.message[:200]}")
            continue
        lines.append(f"{shape}: {len(served.token_ids)} tokens: {json.dumps(served.text, ensure_ascii=False)}")
        lines.append(f"{shape} ranges: {json.dumps(served.placeholders)}")
        offline = record.offline.get(shape)
        verdict = ("not compared" if offline is None else f"not compared ({offline.error})" if offline.error else
                   "same tokens and ranges" if (offline.token_ids, offline.placeholders) ==
                   (served.token_ids, served.placeholders) else
                   "differs inside the placeholder ranges (the same text outside them)" if offline.text == served.text else
                   f"differs: {len(offline.token_ids)} tokens: {json.dumps(offline.text, ensure_ascii=False)}")
        lines.append(f"{shape} offline: {verdict}")
    lines.append(f"status: {result.status.value}")
    return "\n".join(lines) + "\n"


def test_served_render(family, variant, family_snapshot, request):
    """The catalogue's `served` check (as `vlcheck check` runs it), then its snapshot."""
    result = run_check(request, "served", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    assert_as_declared(result, variant)
    assert family_snapshot == served_document(family, variant, result), (
        f"{family.name} [{variant.kind}] served: the served prompts differ from the snapshot (diff below)")
