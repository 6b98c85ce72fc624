"""Known defects of vLLM's video decoding, declared once per codec and container rather than in
every family's spec: a decoder's defect is the same for every family whose loader uses that codec.
The `video_loaders` check reports a cell whose every finding one of these covers as a declared
deviation (with the reason), and fails on any other; a defect whose versions do not include the
installed vLLM does not apply, so a fix shows as `pass`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecoderDefect:
    codec: str
    """vLLM's decoding library (`backend` in `--media-io-kwargs`): opencv, pyav, torchcodec."""
    container: str
    """A name of `core.video_containers.CONTAINERS`."""
    words: tuple[str, ...]
    """Words one of which the finding's line contains; empty: every finding of that codec and container."""
    vllm: str
    """The vLLM versions it was measured on (PEP 440)."""
    reason: str
    """What was measured, with the evidence."""

    def covers(self, codec: str, container: str, finding: str, vllm_version: str | None) -> bool:
        from packaging.specifiers import SpecifierSet

        return (codec == self.codec and container == self.container and (not self.words or any(w in finding for w in self.words))
                and vllm_version is not None and SpecifierSet(self.vllm).contains(vllm_version, prereleases=True))


VFR_METADATA = ("sampled frames", "passes on fps", "passes on duration", "places frames", "the processor's prompt")

DEFECTS = (
    DecoderDefect(
        "opencv", "interlaced", (), ">=0.24.0,<=0.33.0",
        "OpenCV (opencv-python-headless 5.0.0, its bundled FFmpeg) does not convert an interlaced H.264 "
        "frame to BGR (swscale: 'Cannot convert interlaced to progressive frames'), and vLLM passes on "
        "whatever the buffer held: black frames or other source frames, from run to run, under the "
        "requested labels. PyAV decodes the same file right. Measured 2026-11-28 with vLLM 0.24.0 and "
        "0.33.0 on the set's `interlaced` mp4 (x264, tff)."),
    DecoderDefect(
        "opencv", "vfr", VFR_METADATA, ">=0.24.0,<=0.33.0",
        "vLLM's loaders treat a variable-frame-rate file as constant-rate: OpenCV reports FFmpeg's average "
        "rate (12.1263 fps for 48 frames over 4.0 s) and a duration of 3.9583 s, so fps-driven loaders "
        "sample other frames than over the file's 4 s (qwen2_vl: 6 frames, not 8) and the processor places "
        "frame i at i / 12.1263 s, up to 41 ms from where the file shows it. Measured 2026-11-28, vLLM 0.24.0 "
        "and 0.33.0, the set's `vfr` mp4 (frames of 1/24 s and 1/8 s in turn)."),
    DecoderDefect(
        "pyav", "vfr", (), "==0.24.0",
        "vLLM 0.24.0's PyAV codec seeks to index / average fps seconds and takes the first frame at or "
        "after it, so on a variable-frame-rate file it returns the frame shown at that time under the "
        "requested index (labels [0, 1, 3, ...], frames [0, 2, 4, ...]), besides the average-rate metadata "
        "the opencv codec passes on. vLLM 0.33.0 has no PyAV codec. Measured 2026-11-28 on the set's `vfr` mp4."),
    DecoderDefect(
        "pyav", "webm_vp9", (), "==0.24.0",
        "A WebM stream's header holds neither a frame count nor a duration; vLLM 0.24.0's PyAV codec reads "
        "both as 0 (it never asks the container's own duration), so the generic loader takes 1 frame of 48, "
        "qwen2_vl's raises ZeroDivisionError, qwen3_vl's takes none, opencv_dynamic's labels frame -1. The "
        "opencv codec reads the same file right. Measured 2026-11-28 on the set's `webm_vp9` (libvpx-vp9)."),
)


def defect_covering(codec: str, container: str, finding: str, vllm_version: str | None) -> DecoderDefect | None:
    return next((d for d in DEFECTS if d.covers(codec, container, finding, vllm_version)), None)
