"""A real network's faults on a served family-config: the example's media fetched over http from a
loopback media server (`media_server.py`) that is slow, redirects, mislabels its content type,
misses the file, cuts the body short, or stalls mid-body.

The right answer is known: the same bytes sent as a data URL. A case passes with that answer (the
same prompt tokens and the same item hashes, vLLM's hash of the decoded pixels) or, where the
fault leaves nothing to serve, with a 4xx. A 5xx, no answer, another answer, or a server whose next
valid request (sent after every fault not answered rightly) renders otherwise fails. Each outcome also says how often the media server was asked
for the file: a case vLLM never fetched proves nothing and says so.

Images go as the example's PNG, audio as its clip in a WAV file; videos as an mp4 (H.264) file from
`core/video_containers`, fetched by the server's default video loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from vlcheck.served.bad_requests import Outcome, normalized
from vlcheck.served.client import Reply
from vlcheck.served.media_server import MediaServer, Route
from vlcheck.served.requests import bytes_data_url, items, png_bytes, wav_bytes
from vlcheck.spec.schema import MODALITIES, Declaration, Variant

SLOW_S = 0.5
"""The slow origin's delay before it answers: well inside every fetch timeout vLLM has (5 s for images,
30 s for videos by default), so the right answer is the only right outcome."""

CASE_TIMEOUT_S = 60.0
RIGHT = "the right answer"


@dataclass(frozen=True)
class Fault:
    name: str
    route: Callable[[bytes, str], Route]
    """The file's bytes and MIME type -> how the media server answers."""

    serves: str
    """`answer`: the right answer is the only pass; `answer or 4xx`: either; `4xx`: nothing to serve."""

    known_server_error: Declaration | None = None


ORIGIN_404_500 = Declaration(
    reason="vLLM 0.24.0 answers 500 when the media URL's origin answers 404: aiohttp's ClientResponseError "
           "(\"404, message='Not Found'\") is not turned into a 4xx. vLLM 0.33.0 answers 422 (\"Failed to fetch media "
           "from URL: HTTP 404 error\": vllm/multimodal/media/connector.py _wrap_media_fetch_error). Measured on "
           "127.0.0.1 with the render server, image and video, 2026-11-29; audio alike, 2026-11-30 (0.33.0's message names 'image_url' for an audio_url part)",
    vllm="==0.24.0", transformers=">=5.16.1,<=5.20.2")

CUT_BODY_500 = Declaration(
    reason="vLLM answers 500 when the origin closes the connection before Content-Length bytes came: aiohttp's "
           "ClientPayloadError (\"Response payload is not completed: <ContentLengthError: 400, message='Not enough "
           "data to satisfy content length header ...'>\") is a connection error, which 0.33.0's "
           "_wrap_media_fetch_error leaves as-is 'to allow retry logic' and its error handler answers as 500. "
           "Measured on vLLM 0.24.0 and 0.33.0, image and video, 2026-11-29; audio alike, 2026-11-30",
    vllm=">=0.24.0,<=0.33.0", transformers=">=5.16.1,<=5.20.2")

STALL_500 = Declaration(
    reason="vLLM answers 500 with an empty message when the origin stalls mid-body past the fetch timeout "
           "(VLLM_IMAGE_FETCH_TIMEOUT): the timeout is not turned into a 4xx (408/504 would say what happened). "
           "Measured on vLLM 0.24.0 and 0.33.0, an image, 2026-11-29",
    vllm=">=0.24.0,<=0.33.0", transformers=">=5.16.1,<=5.20.2")

FAULTS: tuple[Fault, ...] = (
    Fault("served as is", lambda data, mime: Route(data, mime), "answer"),
    Fault(f"slow origin ({SLOW_S:g} s before it answers)", lambda data, mime: Route(data, mime, delay_s=SLOW_S), "answer"),
    Fault("redirect (302) to the file", lambda data, mime: Route(b"", mime, redirect_to="/file"), "answer"),
    Fault("wrong content type (text/html)", lambda data, mime: Route(data, "text/html; charset=utf-8"), "answer or 4xx"),
    Fault("generic content type (application/octet-stream)",
          lambda data, mime: Route(data, "application/octet-stream"), "answer or 4xx"),
    Fault("not found (404)", lambda data, mime: Route(b"no such file", "text/plain", status=404), "4xx",
          known_server_error=ORIGIN_404_500),
    Fault("body cut short (half of Content-Length)",
          lambda data, mime: Route(data, mime, short_by=len(data) // 2), "4xx", known_server_error=CUT_BODY_500),
)


def stall_fault(stall_s: float) -> Fault:
    """The origin sends half the body, then nothing for `stall_s` (set beyond the server's fetch timeout):
    run once per server-wide test, not per family-config (it costs the fetch timeout)."""
    return Fault(f"stalls mid-body ({stall_s:g} s)", lambda data, mime: Route(data, mime, stall_s=stall_s), "4xx",
                 known_server_error=STALL_500)


def media_file(variant: Variant, modality: str) -> tuple[bytes, str]:
    """The bytes and MIME type of the example's first item as a file: the PNG or WAV the data URL
    carries, or an mp4 for a video (frames cannot travel over http as vLLM's `video/jpeg` list)."""
    if modality == "image":
        return png_bytes(items(variant, modality, 1)[0]), "image/png"
    if modality == "audio":
        return wav_bytes(*items(variant, modality, 1)[0]), "audio/wav"
    from vlcheck.core.video_containers import CONTAINERS, container

    made = container(next(c for c in CONTAINERS if c.name == "mp4_h264"))
    return made.data, made.spec.mime


Send = Callable[[str, str, float], Reply]
"""(url, modality, timeout_s) -> the answer to the example's request with that URL as its one item."""


@dataclass
class FaultOutcome(Outcome):
    fetches: int = 0
    """Requests the media server got for the case's path (its redirect target included)."""


def fingerprint(reply: Reply) -> Any:
    """What the right answer must repeat: the prompt tokens and the items' hashes (render route)."""
    if not isinstance(reply.body, dict):
        return None
    features = reply.body.get("features") or {}
    return reply.body.get("token_ids"), features.get("mm_hashes")


def judge(fault: Fault, reply: Reply, right: Any, fetches: int, versions: tuple[str | None, str | None],
          same: Callable[[Reply], Any] = fingerprint, case: str = "") -> FaultOutcome:
    """The outcome of one fault, named `case` (default: the fault's name)."""
    outcome = _judged(fault, reply, right, fetches, versions, same)
    outcome.case = case or fault.name
    return outcome


def _judged(fault: Fault, reply: Reply, right: Any, fetches: int, versions: tuple[str | None, str | None],
            same: Callable[[Reply], Any]) -> FaultOutcome:
    if reply.status is None:
        return FaultOutcome(fault.name, None, f"NO ANSWER: {normalized(reply.message)}",
                            "no answer (a hang or a dropped connection)", fetches=fetches)
    if reply.status >= 500:
        known = fault.known_server_error
        if known is not None and known.applies(*versions):
            return FaultOutcome(fault.name, reply.status, f"SERVER ERROR {reply.status} (known on {known.scope}): "
                                                          f"{normalized(reply.message)}", fetches=fetches)
        return FaultOutcome(fault.name, reply.status, f"SERVER ERROR {reply.status}: {normalized(reply.message)}",
                            f"answered {reply.status}: a media fault must get a 4xx or the right answer", fetches=fetches)
    if 400 <= reply.status < 500:
        text = normalized(reply.message)
        why = "" if fault.serves != "answer" else f"rejected {reply.status}: the file was there to serve"
        return FaultOutcome(fault.name, reply.status, f"rejected {reply.status}: {text}",
                            why or ("" if text else f"rejected {reply.status} without a message"), fetches=fetches)
    if fault.serves == "4xx":
        return FaultOutcome(fault.name, reply.status, f"accepted {reply.status}",
                            f"answered {reply.status}: there was no whole file to serve", fetches=fetches)
    if same(reply) != right:
        return FaultOutcome(fault.name, reply.status, "accepted: ANOTHER ANSWER than the same bytes as a data URL",
                            "another answer than the same file sent as a data URL", fetches=fetches)
    return FaultOutcome(fault.name, reply.status, RIGHT, fetches=fetches)


def run_faults(send: Send, variant: Variant, faults: tuple[Fault, ...] = FAULTS,
               same: Callable[[Reply], Any] = fingerprint) -> list[FaultOutcome]:
    """Every fault against a running server, for each modality the variant takes
    (`send(url, modality, timeout_s)`). The right answer is the same file as a data URL; after each
    fault that data URL is sent again and must answer as before."""
    from vlcheck.served.bad_requests import _versions

    versions = _versions()
    outcomes = []
    from vlcheck.core.video_containers import ContainersUnavailable

    for modality in [m for m in MODALITIES if m in variant.modalities]:
        try:
            data, mime = media_file(variant, modality)
        except ContainersUnavailable as err:
            outcomes += [FaultOutcome(f"{modality}: {f.name}", None, f"not run: no {modality} file: {err}") for f in faults]
            continue
        as_data_url = bytes_data_url(data, mime)
        control = send(as_data_url, modality, CASE_TIMEOUT_S)
        if not control.ok:
            outcomes += [FaultOutcome(f"{modality}: {f.name}", None, f"not run: the same file as a data URL was not "
                                      f"served ({control.status} {normalized(control.message)})") for f in faults]
            continue
        right = same(control)
        routes = {"/file": Route(data, mime)}
        routes.update({f"/fault-{i}": fault.route(data, mime) for i, fault in enumerate(faults)})
        with MediaServer(routes) as server:
            for i, fault in enumerate(faults):
                path = f"/fault-{i}"
                before = dict(server.hits)
                reply = send(server.url(path), modality, CASE_TIMEOUT_S)
                fetches = sum(n - before.get(p, 0) for p, n in server.hits.items() if p in (path, "/file"))
                outcome = judge(fault, reply, right, fetches, versions, same, f"{modality}: {fault.name}")
                if not fetches and not outcome.failure:
                    outcome.failure = "vLLM never fetched the file: the case proves nothing"
                if outcome.summary == RIGHT:
                    outcomes.append(outcome)  # it served the file as it should: the server is whole
                    continue
                again = send(as_data_url, modality, CASE_TIMEOUT_S)
                if not again.ok or same(again) != right:
                    outcome.valid_after = (f"{again.status} {normalized(again.message)}" if not again.ok
                                           else "answered differently than before")
                    outcome.failure = outcome.failure or "the same file as a data URL is no longer answered as before"
                outcomes.append(outcome)
    return outcomes


def sender(client, variant: Variant) -> Send:
    """The example's request on the render route with `url` as its one item."""
    from vlcheck.prompt.render import default_questions
    from vlcheck.served.requests import chat_messages

    return lambda url, modality, timeout_s: client.render_chat(
        chat_messages(variant, modality, default_questions(variant, modality)[0], 1, urls=[url]), timeout_s=timeout_s)
