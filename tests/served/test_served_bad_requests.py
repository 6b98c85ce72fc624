"""Bad requests over HTTP, per family-config, against its running render server: each gets a 4xx
with a message (or, for an odd but valid image, is served), never a 5xx, a hang or a dropped
connection, and the example's valid request renders exactly as before after each one. The table is
snapshotted per family-config, as the hostile-input table is."""

import pytest

from vlcheck.served.render import served_record


def test_served_bad_requests(family, variant, family_snapshot):
    record = served_record(family, variant)
    if isinstance(record, Exception):
        pytest.skip(f"{family.name} [{variant.kind}]: no server to send bad requests to: {str(record).splitlines()[0]}")
    lines = [f"# bad requests over HTTP (vllm launch render, CPU): {family.name} [{variant.kind}]"]
    lines += [o.line for o in record.bad_requests]
    failures = [f"{o.case}: {o.failure} ({o.summary})" for o in record.bad_requests if o.failure]
    assert not failures, f"{family.name} [{variant.kind}] served bad requests:\n" + "\n".join(failures)
    assert family_snapshot == "\n".join(lines) + "\n", (
        f"{family.name} [{variant.kind}] served bad requests: outcomes differ from the snapshot (diff below)")
