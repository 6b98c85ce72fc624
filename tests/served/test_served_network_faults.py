"""A real network's faults, per family-config, against its running render server: the example's
image (video, audio) fetched over http from a loopback media server that is slow, redirects, mislabels
its content type, misses the file or cuts it short (`vlcheck/served/network_faults.py`). Each gets
the answer the same file gets as a data URL (the same tokens and item hashes) or a 4xx, never a 5xx
(unless declared server-wide for these versions) or a hang. The table is snapshotted per
family-config, with the video container files (`vlcheck/served/containers.py`) where the family takes
video. The stall past the fetch timeout costs that timeout, so it runs once per run (below)."""

import pytest

from vlcheck.runners.pytest_plugin import selected_families
from vlcheck.runners.testing import measured
from vlcheck.served import network_faults, render
from vlcheck.served.client import Client
from vlcheck.served.render import served_record
from vlcheck.spec.registry import all_families


@pytest.mark.sends("image", "video", "audio")
def test_served_network_faults(family, variant, family_snapshot, request):
    result = measured(request, "served", family, variant)  # the served check sends them (or the store has them)
    stored = result.data.get(f"{variant.kind}.served_network_fault_lines")
    if stored is not None:
        lines, containers = stored, result.data.get(f"{variant.kind}.served_container_lines") or []
        failures = [d for d in result.details if d.startswith(("media fault ", "video container "))]
    else:  # no record kept (no server): ask for one here, which says why
        record = served_record(family, variant)
        if isinstance(record, Exception):
            pytest.skip(f"{family.name} [{variant.kind}]: no server to send media faults to: {str(record).splitlines()[0]}")
        lines = [f"{o.line} (fetched {o.fetches}x)" for o in record.network_faults]
        containers = [o.line for o in record.containers]
        failures = ([f"media fault {o.case!r}: {o.failure} ({o.summary})" for o in record.network_faults if o.failure]
                    + [f"video container {o.container}: {o.failure} ({o.summary})" for o in record.containers if o.failure])
    assert not failures, f"{family.name} [{variant.kind}] served media faults:\n" + "\n".join(failures)
    assert lines, f"{family.name} [{variant.kind}]: no media fault was sent (the family takes neither images nor video)"
    assert bool(containers) == ("video" in variant.modalities), f"{family.name} [{variant.kind}]: video containers {containers}"
    document = [f"# media over http with a real network's faults (vllm launch render, CPU): {family.name} [{variant.kind}]",
                *lines]
    if containers:
        document += ["# video container files, as data URLs and over http", *containers]
    assert family_snapshot == "\n".join(document) + "\n", (
        f"{family.name} [{variant.kind}] served media faults: outcomes differ from the snapshot (diff below)")


FETCH_TIMEOUT_S = 2
STALL_S = 4.0
"""The stall outlasts the server's fetch timeouts, which this test sets to FETCH_TIMEOUT_S (vLLM's defaults:
5 s for an image, 30 s for a video) so that the case costs seconds, not half a minute."""


def _first_servable_with_video(config):
    loaded = all_families()
    env = {**render.NO_FETCH_RETRIES, "VLLM_IMAGE_FETCH_TIMEOUT": str(FETCH_TIMEOUT_S),
           "VLLM_VIDEO_FETCH_TIMEOUT": str(FETCH_TIMEOUT_S)}
    candidates = [(loaded[n], v) for n in selected_families(config) if n in loaded for v in loaded[n].variants]
    for spec, variant in sorted(candidates, key=lambda sv: "video" not in sv[1].modalities):
        try:
            return (spec, variant, *render.start(spec, variant, env=env))
        except render.NotServable:
            continue
    pytest.skip("no selected family-config can be served here (chat templates not cached)")


def test_a_stalled_origin_gets_an_answer_within_the_fetch_timeout(pytestconfig):
    spec, variant, server, _ = _first_servable_with_video(pytestconfig)
    try:
        server.wait_ready()
        client = Client(server.url)
        [*outcomes] = network_faults.run_faults(network_faults.sender(client, variant), variant,
                                                (network_faults.stall_fault(STALL_S),))
    finally:
        server.stop()
    assert outcomes, f"{spec.name} [{variant.kind}]: takes neither images nor video"
    failures = [f"{o.case}: {o.failure} ({o.summary})" for o in outcomes if o.failure]
    assert not failures, f"{spec.name} [{variant.kind}] a stalled origin:\n" + "\n".join(failures)
    assert all(o.status is not None for o in outcomes)  # an answer, not the client's own timeout
