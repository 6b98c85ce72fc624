"""Video container files as people upload them, written with PyAV (FFmpeg's own bindings), each
with its truth: which source frame sits at which presentation time.

Every frame carries its index in its pixels: 8 vertical bars, the index's bits, then 8 bars of
their complement, grey 16 or 235. Bars span the whole height, so a field-coded (interlaced) frame
keeps them, and a lossy codec moves a bar's grey by a few levels, never across the middle. A black
(or otherwise broken) frame fails the complement and reads as no index at all: `frame_index` says
which source frame a loader returned, whatever it labelled it.

The set (`CONTAINERS`), 48 frames of 128x64 each, 12 fps (4 s) unless said:
- `mp4_h264`: mp4, H.264 (libx264), a keyframe every 12 frames, B-frames: what phones and most
  uploads are.
- `webm_vp9`: WebM, VP9 (libvpx-vp9): what browsers record; its stream header holds no frame count.
- `interlaced`: mp4, H.264 coded as interlaced fields (top field first), flagged so.
- `vfr`: mp4, H.264 at a variable frame rate: frames last 1/24 s and 1/8 s in turn (average 12 fps).
- `sparse_keyframes`: mp4, H.264 with one keyframe for all 48 frames: a loader that seeks and takes
  the keyframe it landed on returns frame 0 labelled as the frame it asked for.

The bytes are deterministic (one encoder thread) and cached on disk by a hash of the writer's
parameters, vlcheck's writer version and PyAV's and FFmpeg's versions.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 128, 64
FRAMES = 48
FPS = 12
BITS = 8
DARK, LIGHT = 16, 235
WRITER_CODE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
"""This module (the writer) as part of the cache key: an edit to it writes the containers again."""


class ContainersUnavailable(RuntimeError):
    """PyAV is missing, or its FFmpeg lacks an encoder the set needs."""


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    format: str
    """FFmpeg's muxer (`mp4`, `webm`)."""
    codec: str
    """FFmpeg's encoder."""
    mime: str
    gop: int = 12
    interlaced: bool = False
    durations: tuple[Fraction, ...] = ()
    """Per-frame durations in turn (seconds) for a variable frame rate; empty: 1/FPS each."""

    def pts_seconds(self) -> list[Fraction]:
        steps = self.durations or (Fraction(1, FPS),)
        times, t = [], Fraction(0)
        for i in range(FRAMES):
            times.append(t)
            t += steps[i % len(steps)]
        return times


CONTAINERS = (
    ContainerSpec("mp4_h264", "mp4", "libx264", "video/mp4"),
    ContainerSpec("webm_vp9", "webm", "libvpx-vp9", "video/webm"),
    ContainerSpec("interlaced", "mp4", "libx264", "video/mp4", interlaced=True),
    ContainerSpec("vfr", "mp4", "libx264", "video/mp4", durations=(Fraction(1, 24), Fraction(1, 8))),
    ContainerSpec("sparse_keyframes", "mp4", "libx264", "video/mp4", gop=FRAMES),
)


@dataclass(frozen=True)
class Container:
    spec: ContainerSpec
    data: bytes
    pts: tuple[float, ...]
    """The truth: source frame i is shown at pts[i] seconds."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def duration(self) -> float:
        steps = self.spec.durations or (Fraction(1, FPS),)
        return float(self.spec.pts_seconds()[-1] + steps[(FRAMES - 1) % len(steps)])

    def data_url(self) -> str:
        return f"data:{self.spec.mime};base64," + base64.b64encode(self.data).decode()


def _av():
    try:
        import av
    except ImportError as err:
        raise ContainersUnavailable(f"PyAV (`av`) is not installed: {err}") from None
    return av


def frame_pixels(index: int):
    """Source frame `index` as (HEIGHT, WIDTH, 3) uint8 RGB."""
    import numpy as np

    bits = [(index >> b) & 1 for b in range(BITS)]
    levels = [LIGHT if bit else DARK for bit in bits] + [DARK if bit else LIGHT for bit in bits]
    row = np.repeat(np.array(levels, dtype=np.uint8), WIDTH // (2 * BITS))
    return np.repeat(np.tile(row, (HEIGHT, 1))[:, :, None], 3, axis=2)


def frame_index(frame) -> int | None:
    """The source index a decoded frame (any size, RGB) shows, or None when its bars do not read as
    an index and its complement (a black, grey or corrupted frame)."""
    import numpy as np

    frame = np.asarray(frame, dtype=np.float32)
    height, width = frame.shape[:2]
    band = frame[height // 4: height - height // 4].mean(axis=(0, 2))
    bar = width / (2 * BITS)
    means = [band[int(i * bar + bar / 4): int((i + 1) * bar - bar / 4)].mean() for i in range(2 * BITS)]
    if any(abs(m - (DARK + LIGHT) / 2) < (LIGHT - DARK) / 4 for m in means):
        return None
    bits = [m > (DARK + LIGHT) / 2 for m in means]
    if any(bits[b] == bits[b + BITS] for b in range(BITS)):
        return None
    return sum(1 << b for b in range(BITS) if bits[b])


def cache_key(spec: ContainerSpec) -> str:
    av = _av()
    from vlcheck.core import installed_code

    # PyAV's code by content; the FFmpeg a wheel bundles lies beside it (av.libs), each library's file named
    # with a hash of its content by the wheel's repair tool; a system FFmpeg is named by its versions
    bundled = Path(av.__file__).parent.parent / "av.libs"
    fields = {"spec": repr(spec), "frames": FRAMES, "size": [WIDTH, HEIGHT], "fps": FPS, "writer": WRITER_CODE,
              "av": installed_code.identity("av").digest, "ffmpeg": sorted(av.library_versions.items()),
              "ffmpeg_files": sorted(p.name for p in bundled.glob("*")) if bundled.is_dir() else []}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:24]


def cache_dir() -> Path:
    return Path(os.environ.get("VLCHECK_VIDEO_CACHE") or Path.home() / ".cache" / "vlcheck" / "video-containers")


def write(spec: ContainerSpec) -> bytes:
    """The container's bytes, written now."""
    av = _av()
    if spec.codec not in av.codecs_available:
        raise ContainersUnavailable(f"{spec.name}: PyAV {av.__version__}'s FFmpeg has no {spec.codec} encoder")
    times = spec.pts_seconds()
    time_base = Fraction(1, 48 * FPS)  # every pts of the set is a whole number of these
    buffer = io.BytesIO()
    # bitexact: no random segment id or library version strings in the file (the same bytes each time)
    with av.open(buffer, mode="w", format=spec.format, options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream(spec.codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.time_base = time_base
        stream.codec_context.time_base = time_base
        stream.thread_count = 1
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        stream.gop_size = spec.gop
        stream.options = _encoder_options(spec)
        if spec.interlaced:
            stream.codec_context.flags |= av.codec.context.Flags.interlaced_dct | av.codec.context.Flags.interlaced_me
        for i, t in enumerate(times):
            frame = av.VideoFrame.from_ndarray(frame_pixels(i), format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = int(t / time_base), time_base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def _encoder_options(spec: ContainerSpec) -> dict[str, str]:
    if spec.codec == "libx264":
        params = [f"keyint={spec.gop}", f"min-keyint={spec.gop}", "scenecut=0", "threads=1"]
        if spec.interlaced:
            params.append("interlaced=1:tff=1")
        return {"crf": "10", "preset": "medium", "x264-params": ":".join(params)}
    if spec.codec == "libvpx-vp9":
        return {"crf": "10", "b": "0", "row-mt": "0", "threads": "1", "deadline": "good", "cpu-used": "4"}
    return {}


def container(spec: ContainerSpec) -> Container:
    """One container with its truth, from the cache or written (and cached) now."""
    path = cache_dir() / f"{spec.name}-{cache_key(spec)}.{spec.format}"
    try:
        data = path.read_bytes()
    except OSError:
        data = write(spec)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        except OSError:
            pass  # a read-only home: written each time, the same bytes
    return Container(spec, data, tuple(float(t) for t in spec.pts_seconds()))


def containers(names: tuple[str, ...] | None = None) -> list[Container]:
    return [container(spec) for spec in CONTAINERS if names is None or spec.name in names]


def truth_frames(container: Container, indices: list[int]):
    """The source frames at `indices` as arrays (what the same request sends without a file)."""
    import numpy as np

    return np.stack([frame_pixels(i) for i in indices])


def probe(data: bytes) -> dict[str, Any]:
    """What PyAV reads back from a container: every frame's index (by its pixels), pts in seconds,
    keyframe flag and interlacing, in decode output order."""
    av = _av()
    frames = []
    with av.open(io.BytesIO(data)) as inp:
        stream = inp.streams.video[0]
        for frame in inp.decode(stream):
            frames.append({"index": frame_index(frame.to_ndarray(format="rgb24")),
                           "pts": float(frame.pts * frame.time_base), "key": bool(frame.key_frame),
                           "interlaced": bool(frame.interlaced_frame)})
        header = {"frames": stream.frames, "average_rate": float(stream.average_rate or 0),
                  "codec": stream.codec_context.name}
    return {"header": header, "frames": frames}
