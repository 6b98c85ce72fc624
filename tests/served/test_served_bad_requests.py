"""Bad requests over HTTP, per family-config, against its running render server: each gets a 4xx
with a message (or, for an odd but valid image, is served), never a 5xx, a hang or a dropped
connection, and the example's valid request renders exactly as before after each one. The table is
snapshotted per family-config, as the hostile-input table is."""

import pytest

from vlcheck.runners.testing import measured
from vlcheck.served.render import served_record


def test_served_bad_requests(family, variant, family_snapshot, request):
    result = measured(request, "served", family, variant)  # the served check sends them (or the store has them)
    stored = result.data.get(f"{variant.kind}.served_bad_request_lines")
    if stored is not None:
        lines = stored
        failures = [d for d in result.details if d.startswith("bad request ")]
    else:  # no record kept (no server): ask for one here, which says why
        record = served_record(family, variant)
        if isinstance(record, Exception):
            pytest.skip(f"{family.name} [{variant.kind}]: no server to send bad requests to: {str(record).splitlines()[0]}")
        lines = [o.line for o in record.bad_requests]
        failures = [f"bad request {o.case!r}: {o.failure} ({o.summary})" for o in record.bad_requests if o.failure]
    assert not failures, f"{family.name} [{variant.kind}] served bad requests:\n" + "\n".join(failures)
    document = [f"# bad requests over HTTP (vllm launch render, CPU): {family.name} [{variant.kind}]", *lines]
    assert family_snapshot == "\n".join(document) + "\n", (
        f"{family.name} [{variant.kind}] served bad requests: outcomes differ from the snapshot (diff below)")
