"""The container files people upload (`core/video_containers.py`: mp4/H.264, webm/VP9, interlaced,
variable frame rate, sparse keyframes), served: each sent as a data URL and fetched over http from a
loopback media server must render alike (the same prompt tokens and item hashes: the same decoded
frames), with the placeholder lengths vLLM's processor gives offline for the frames vLLM's own
loader decodes from the same bytes. Which frames those are, against the file's truth, is the
`video_loaders` check's: this one shows that the served path decodes the file as the offline one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from vlcheck.core import video_containers
from vlcheck.served.bad_requests import normalized
from vlcheck.served.client import Reply, placeholder_ranges
from vlcheck.served.media_server import MediaServer, Route
from vlcheck.served.network_faults import CASE_TIMEOUT_S, Send, fingerprint
from vlcheck.spec.decoder_defects import defect_covering


@dataclass
class ContainerOutcome:
    container: str
    summary: str
    failure: str = ""
    lengths: list[int] | None = None
    """The served video placeholder lengths (None: not served)."""

    @property
    def line(self) -> str:
        return f"{self.container}: {self.summary}"


def _lengths(reply: Reply) -> list[int]:
    return [length for _, length in placeholder_ranges(reply.body.get("features") or {}).get("video", [])]


def run_containers(send: Send, offline_lengths: Callable[[bytes], list[int] | str], codec: str = "opencv",
                   vllm_version: str | None = None) -> list[ContainerOutcome]:
    """Each container as a data URL and over http; `offline_lengths(data)`: the video placeholder lengths
    of vLLM's processor on vLLM's loader's decode of those bytes (or why there are none). A finding that a
    known defect of `codec` on that container covers (`spec/decoder_defects.py`, e.g. OpenCV's interlaced
    frames, other from run to run) is shown as known, not failed."""
    outcomes = _compare(send, offline_lengths)
    for outcome in outcomes:
        whole = defect_covering(codec, outcome.container, "", vllm_version)
        if whole is not None and not whole.words:  # its frames vary from decode to decode: no answer to hold
            outcome.summary = (f"video placeholder lengths {outcome.lengths}; a known {codec} defect on "
                               f"{outcome.container} (spec/decoder_defects.py): not held to one answer")
            outcome.failure = ""
        elif outcome.failure and defect_covering(codec, outcome.container, outcome.failure, vllm_version):
            outcome.summary += f"; {outcome.failure}: a known {codec} defect on {outcome.container} (spec/decoder_defects.py)"
            outcome.failure = ""
    return outcomes


def _compare(send: Send, offline_lengths: Callable[[bytes], list[int] | str]) -> list[ContainerOutcome]:
    try:
        sources = video_containers.containers()
    except video_containers.ContainersUnavailable as err:
        return [ContainerOutcome("(all)", f"not run: the container files cannot be written: {err}")]
    outcomes = []
    with MediaServer({f"/{c.name}": Route(c.data, c.spec.mime) for c in sources}) as server:
        for container in sources:
            as_data = send(container.data_url(), "video", CASE_TIMEOUT_S)
            fetched = server.hits[f"/{container.name}"]
            over_http = send(server.url(f"/{container.name}"), "video", CASE_TIMEOUT_S)
            proof = server.hits[f"/{container.name}"] - fetched
            offline = offline_lengths(container.data)
            if not as_data.ok or not over_http.ok:
                bad = as_data if not as_data.ok else over_http
                how = "as a data URL" if not as_data.ok else "over http"
                outcome = ContainerOutcome(container.name, f"rejected {how}: {bad.status} {normalized(bad.message)}")
                if bad.status is None or bad.status >= 500:
                    outcome.failure = f"{how}: {bad.status or 'no answer'}: a file must get an answer or a 4xx"
                elif isinstance(offline, list):
                    outcome.failure = f"rejected {how}, while offline vLLM's loader and processor take it ({offline})"
                outcomes.append(outcome)
                continue
            served = _lengths(as_data)
            alike = fingerprint(as_data) == fingerprint(over_http)
            outcome = ContainerOutcome(container.name, f"video placeholder lengths {served} (data URL and http "
                                                       f"{'alike' if alike else 'NOT alike'}, fetched {proof}x; offline {offline})",
                                       lengths=served)
            if not alike:
                outcome.failure = "the file over http renders otherwise than as a data URL"
            elif not proof:
                outcome.failure = "the http URL was never fetched"
            elif isinstance(offline, list) and offline != served:
                outcome.failure = f"served placeholder lengths {served}, offline {offline} for the same bytes"
            outcomes.append(outcome)
    return outcomes


def offline_lengths_for(processor, prompt: str, model_dir: str, video_kwargs: dict[str, Any]) -> Callable[[bytes], list[int] | str]:
    """vLLM's processor on `prompt` with the frames vLLM's loader decodes from a file's bytes."""
    from vlcheck import adapter
    from vlcheck.adapter import video as video_adapter

    def lengths(data: bytes) -> list[int] | str:
        try:
            item = video_adapter.decode(model_dir, data, video_kwargs=video_kwargs)
            out = adapter.apply_processor(processor, prompt, {"video": item})
        except Exception as err:  # noqa: BLE001 - compared with the served answer, which says the same or not
            return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:160]}"
        return [length for _, length in out["placeholders"].get("video", [])]

    return lengths
