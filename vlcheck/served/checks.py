"""The `served` check: a family-config served by `vllm launch render` against the offline path.

(a) every request renders to the same token ids and placeholder ranges as vLLM's processor on the
    example's own prompt, or the spec declares `deviations.served` (which covers only this
    comparison); (c) `/tokenize` with the same messages gives the render's token ids; (d) a uuid
    on a content part becomes that item's hash, the same parts left empty with known uuids render
    the same tokens, and an unknown uuid is rejected; and no bad request (`bad_requests.py`) gets
    a 5xx or hangs or changes what the next valid request renders; (e) the example's media fetched
    over http from a loopback server with a real network's faults (`network_faults.py`) gets the
    answer the same file gets as a data URL, or a 4xx where nothing can be served, and each video
    container file (`containers.py`) renders alike as a data URL and over http, with the placeholder
    lengths of vLLM's processor offline on the same bytes. (c), (d), the bad
    requests and the media faults are not declarable per family: they are the server's contract (a
    server-wide 5xx is declared once, by vLLM version, in the case's table).
"""

from __future__ import annotations

import json

from vlcheck.core.results import CheckResult, Status, declared_deviation
from vlcheck.core.textdiff import describe_difference
from vlcheck.served.render import NotServable, ServedRecord, served_record
from vlcheck.served.server import ServerFailed
from vlcheck.spec.schema import FamilySpec, Variant


def offline_differences(record: ServedRecord) -> list[str]:
    """(a): where the served prompt differs from the offline one, per request shape."""
    found = []
    for shape, served in record.renders.items():
        offline = record.offline.get(shape)
        if not served.ok or offline is None or offline.error:
            continue
        if served.token_ids != offline.token_ids:
            if offline.text == served.text:  # the difference lies inside the placeholder ranges
                at = next(i for i, (a, b) in enumerate(zip(offline.token_ids + [None], served.token_ids + [None])) if a != b)
                diff = (f"the same text outside the placeholder ranges; inside them token {at} differs "
                        f"(offline {offline.token_ids[at:at + 4]}, served {served.token_ids[at:at + 4]}, "
                        f"ranges {served.placeholders})")
            else:
                diff = describe_difference(offline.text, served.text, "offline", "served")
            found.append(f"{shape}: served {len(served.token_ids)} tokens, offline {len(offline.token_ids)}; {diff}")
        elif served.placeholders != offline.placeholders:
            found.append(f"{shape}: same tokens, placeholder ranges served {served.placeholders}, offline {offline.placeholders}")
    return found


def rejected_offline_too(record: ServedRecord, shape: str) -> bool:
    offline = record.offline.get(shape)
    return (not record.renders[shape].ok and offline is not None and bool(offline.error)
            and not offline.unavailable)


def contract_problems(record: ServedRecord) -> list[str]:
    """Requests the server must serve as vLLM documents them: not declarable."""
    problems = []
    for shape, served in record.renders.items():
        if not served.ok and rejected_offline_too(record, shape):
            continue  # vLLM's processor rejects the example's own prompt too: the processor check reports it
        if not served.ok:
            problems.append(f"{shape}: the example's chat request was rejected: {served.reply_status} {served.message[:300]}")
            continue
        tokenized = record.tokenized.get(shape)
        if tokenized is not None and tokenized.ok and tokenized.body.get("tokens") != served.token_ids:
            problems.append(f"{shape}: /tokenize with the same messages gives {len(tokenized.body.get('tokens') or [])} "
                            f"tokens, /v1/chat/completions/render {len(served.token_ids)}")
        elif tokenized is not None and not tokenized.ok:
            problems.append(f"{shape}: /tokenize with the same messages: {tokenized.status} {tokenized.message[:200]}")
    uuid = record.uuid
    if uuid is not None:
        hashes = [h for hs in uuid.hashes.values() for h in hs]
        named = [h for hs in uuid.empty_known_hashes.values() for h in hs]
        # vLLM may hash a uuid with the processing it selects (vLLM 0.33.0's deepseek_vl2 hashes it with its
        # `cropping` flag, h2ovl with `use_msac`): the contract is that the uuid alone names the item, i.e.
        # the same uuids give the same hashes whether the media is sent or not.
        if hashes != uuid.uuids and (not uuid.empty_known.ok or named != hashes):
            problems.append(f"uuid: the items' hashes are {hashes}, not the request's uuids {uuid.uuids}"
                            + (f", and the same uuids without the media give {named}" if uuid.empty_known.ok else ""))
        if not uuid.same_tokens_as_plain:
            problems.append("uuid: the request with uuids renders other tokens than without")
        if not uuid.empty_known.ok:
            problems.append(known_uuid_rejected(uuid.empty_known.status, uuid.empty_known.message))
        elif not uuid.empty_known_same_tokens:
            problems.append("uuid: empty parts with known uuids render other tokens than the items themselves")
        if uuid.empty_unknown.status is None or not 400 <= uuid.empty_unknown.status < 500:
            problems.append(f"uuid: an empty part with an unknown uuid got {uuid.empty_unknown.status} "
                            f"{uuid.empty_unknown.message[:200]} (expected a 4xx)")
    problems += [bad_request_problem(o) for o in record.bad_requests if o.failure]
    problems += [media_fault_problem(o) for o in record.network_faults if o.failure]
    for outcome in record.containers:
        if outcome.failure:
            problems.append(f"video container {outcome.container}: {outcome.failure} ({outcome.summary[:200]})")
    return problems


def known_uuid_rejected(status: int | None, message: str) -> str:
    """A served problem line, in the words every runner writes it (the render server's check and the
    engine tier's served tests): a family's `served` declaration names them as findings."""
    return f"uuid: empty parts with known uuids rejected: {status} {message[:200]}"


def bad_request_problem(outcome) -> str:
    return f"bad request {outcome.case!r}: {outcome.failure} ({outcome.summary[:200]})"


def media_fault_problem(outcome) -> str:
    return f"media fault {outcome.case!r}: {outcome.failure} ({outcome.summary[:200]})"


def declared_for(variant: Variant, problems: list[str]):
    """The family-config's `served` declaration where it names every problem line as a finding (a
    declaration naming no findings excuses no single line: it speaks of the render server's whole
    check), else None."""
    declared = variant.deviation("served")
    if declared is not None and declared.findings and problems and all(declared.covers_finding(p) for p in problems):
        return declared
    return None


def document(record: ServedRecord) -> list[str]:
    """What the served snapshot holds (tests/served/test_served.py), as lines: launch line, template,
    content format, then each request's served prompt and placeholder ranges, and the offline verdict.
    Kept with the result (`served_document`), so that a result taken from the store is snapshotted
    without serving the family-config again."""
    lines = [f"launch: {record.line.portable_text()}",
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
    return lines


def facts(record: ServedRecord) -> dict:
    k = record.kind
    return {
        f"{k}.served_document": document(record),
        f"{k}.served_launch": record.line.portable_text(),
        f"{k}.served_template": record.line.template_source,
        f"{k}.served_content_format": record.content_format,
        f"{k}.served_prompts": {s: r.text for s, r in record.renders.items() if r.ok},
        f"{k}.served_placeholders": {s: r.placeholders for s, r in record.renders.items() if r.ok},
        f"{k}.served_bad_requests": {o.case: o.summary.split(":")[0] for o in record.bad_requests},
        f"{k}.served_bad_request_lines": [o.line for o in record.bad_requests],
        f"{k}.served_network_faults": {o.case: o.summary.split(":")[0] for o in record.network_faults},
        f"{k}.served_network_fault_lines": [f"{o.line} (fetched {o.fetches}x)" for o in record.network_faults],
        f"{k}.served_container_lines": [o.line for o in record.containers],
    }


def served_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    where = f"[{variant.kind}]"
    record = served_record(spec, variant)
    if isinstance(record, NotServable):
        return CheckResult(spec.name, "served", Status.SKIP, f"{where} {spec.name}: {record}")
    if isinstance(record, ServerFailed):
        last = [line for line in str(record).splitlines() if "Error" in line]
        return CheckResult(spec.name, "served", Status.FAIL,
                           f"{where} {spec.name}: `vllm launch render` did not serve the example's launch line: "
                           f"{(last[-1] if last else str(record).splitlines()[0])[:300]}", [str(record)],
                           frames=getattr(record, "frames", []))
    data = facts(record)
    contract = contract_problems(record)
    if contract:
        return CheckResult(spec.name, "served", Status.FAIL, f"{where} {spec.name}: {contract[0]}", contract, data)
    differences = offline_differences(record)
    if differences:
        first = differences[0].splitlines()
        return declared_deviation(CheckResult(spec.name, "served", Status.FAIL,
                                              f"{where} {spec.name}: served vs offline: {' '.join(first[:4])[:400]}",
                                              differences, data), variant)
    both = [s for s in record.renders if rejected_offline_too(record, s)]
    if both and len(both) == len(record.renders):
        return CheckResult(spec.name, "served", Status.SKIP,
                           f"{where} {spec.name}: nothing served: vLLM's processor rejects every request on both paths "
                           f"(served: {record.renders[both[0]].message[:200]}); the processor check reports it", data=data)
    compared = sum(1 for s in record.offline.values() if not s.error)
    not_compared = [f"{shape}: {o.error[:160]}" for shape, o in record.offline.items() if o.error]
    return CheckResult(spec.name, "served", Status.PASS,
                       f"{where} {len(record.renders)} request(s) served (server up in {record.start_s:.1f} s); "
                       f"{compared} equal to the offline path"
                       + (f", {len(not_compared)} not compared ({not_compared[0]})" if not_compared else "")
                       + "; /tokenize agrees, uuids hash", details=not_compared, data=data)
