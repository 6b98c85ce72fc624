"""The served path on CPU: each family-config served by `vllm launch render` (a real server on
127.0.0.1, the spec's engine args as `vllm serve` flags), its example's chat requests sent as
OpenAI chat completions. Served vs offline (vLLM's processor on the example's own prompt), the
snapshot of the served prompts and placeholder ranges, `/tokenize` against render, and the uuid
round trip (vlcheck/served/checks.py)."""

from vlcheck.runners.testing import assert_as_declared, run_check
from vlcheck.served.checks import document
from vlcheck.served.render import served_record


def served_document(family, variant, result) -> str:
    """The snapshot: the served check's own record of what it served (`served.checks.document`),
    then its status."""
    lines = result.data.get(f"{variant.kind}.served_document")
    if lines is None:  # a skip or an unserved launch line keeps no record: serve it here
        record = served_record(family, variant)
        lines = document(record) if hasattr(record, "renders") else [str(record).splitlines()[0]]
    return "\n".join([f"# served by vllm launch render (CPU): {family.name} [{variant.kind}]", *lines,
                      f"status: {result.status.value}"]) + "\n"


def test_served_render(family, variant, family_snapshot, request):
    """The catalogue's `served` check (as `vlcheck check` runs it), then its snapshot."""
    result = run_check(request, "served", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    assert_as_declared(result, variant)
    assert family_snapshot == served_document(family, variant, result), (
        f"{family.name} [{variant.kind}] served: the served prompts differ from the snapshot (diff below)")
