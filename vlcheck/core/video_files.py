"""Videos as container files (mp4), written and decoded with OpenCV (cv2), independently of
vLLM's video loader: the frames vLLM's server should decode from a file, and the indices its
loader samples, computed here from the loader's documented rules.

OpenCV because vLLM decodes with it by default (`VLLM_VIDEO_LOADER_BACKEND=opencv`, codec
`opencv`) and both vlcheck venvs have it (opencv-python-headless 5.0.0 under vLLM 0.24.0; PyAV
is in neither). Its wheels carry FFmpeg's MPEG-4 Part 2 encoder (`mp4v`), not H.264 (`avc1`:
"Could not open codec h264_v4l2m2m"), measured with cv2 5.0.0. The codec is lossy (the example's
8-frame 64x48 clip decodes 6.3 levels off its source on average): what is compared is the
decoded frames, never the source's.
"""

from __future__ import annotations

import base64
import math
import os
import tempfile
from dataclasses import dataclass
from typing import Any

FOURCC = "mp4v"
FILE_FPS = 2.0
"""The fps written into the file: the examples' video metadata says 2 fps (`media.video_metadata`),
and at 2 fps every loader below keeps all of an 8-frame clip (qwen2_vl and qwen3_vl sample 2 fps)."""

DEFAULT_NUM_FRAMES = 32
"""`VideoMediaIO`'s `num_frames` where `--media-io-kwargs` sets none (vLLM 0.24.0)."""


class VideoFileUnavailable(RuntimeError):
    """No mp4 can be written or read here (no cv2, or its FFmpeg lacks the codec)."""


class LoaderNotModelled(LookupError):
    """vLLM picks a video loader whose sampling vlcheck does not reproduce."""


@dataclass
class Decoded:
    frames: Any
    """(frames, height, width, 3) uint8 RGB, every frame of the file in order."""
    fps: float
    """The container's frame rate."""
    frame_count: int
    """The container's frame count (`CAP_PROP_FRAME_COUNT`): what vLLM's loader samples from."""


def _cv2():
    try:
        import cv2
    except ImportError as err:
        raise VideoFileUnavailable(f"opencv (cv2) is not installed: {err}") from None
    return cv2


def write_mp4(frames, fps: float = FILE_FPS) -> bytes:
    """RGB frames (frames, height, width, 3) as an mp4 file's bytes."""
    cv2 = _cv2()
    height, width = frames.shape[1:3]
    fd, path = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    try:
        writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*FOURCC), fps, (width, height))
        if not writer.isOpened():
            raise VideoFileUnavailable(f"cv2 {cv2.__version__} cannot write {FOURCC} mp4 files")
        for frame in frames:
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        writer.release()
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def decode_mp4(data: bytes) -> Decoded:
    """Every frame of an mp4, read one by one from a file (vLLM reads from a byte stream)."""
    import numpy as np

    cv2 = _cv2()
    fd, path = tempfile.mkstemp(suffix=".mp4")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    try:
        capture = cv2.VideoCapture(path)
        if not capture.isOpened():
            raise VideoFileUnavailable(f"cv2 {cv2.__version__} cannot open the mp4 it wrote")
        fps, count = capture.get(cv2.CAP_PROP_FPS), int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        frames = []
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
        capture.release()
    finally:
        os.unlink(path)
    return Decoded(np.stack(frames), fps, count)


def data_url(data: bytes) -> str:
    return "data:video/mp4;base64," + base64.b64encode(data).decode()


def sampled_indices(loader: str, decoded: Decoded, video_kwargs: dict[str, Any]) -> list[int]:
    """The frame indices the server's loader takes from the file, with the server's
    `--media-io-kwargs` for video (rules of vLLM 0.24.0's `multimodal/video.py`)."""
    total, source_fps = decoded.frame_count, decoded.fps
    if loader == "opencv":
        return _uniform(total, source_fps, video_kwargs.get("num_frames", DEFAULT_NUM_FRAMES),
                        video_kwargs.get("fps", -1))
    if loader == "qwen2_vl":
        return _qwen2_vl(total, source_fps, video_kwargs.get("fps", 2), video_kwargs)
    if loader == "qwen3_vl":
        return _qwen3_vl(total, source_fps, video_kwargs.get("fps", 2), video_kwargs)
    if loader == "opencv_dynamic":
        return _glm4v(total, source_fps, video_kwargs.get("fps", 2), video_kwargs.get("max_duration", 300))
    raise LoaderNotModelled(f"vLLM decodes this model's videos with its `{loader}` loader, whose frame "
                            "sampling vlcheck does not reproduce")


def _uniform(total: int, source_fps: float, num_frames: int, fps: float) -> list[int]:
    """`num_frames` evenly spaced (or one per 1/fps seconds, whichever is fewer)."""
    import numpy as np

    n = min(num_frames, total) if num_frames > 0 else total
    if fps > 0:
        n = min(n, math.floor(total / source_fps * fps))
    n = max(1, n)
    return list(range(n)) if n == total else np.linspace(0, total - 1, n, dtype=int).tolist()


def _qwen2_vl(total: int, source_fps: float, fps: float, kwargs: dict[str, Any]) -> list[int]:
    """transformers' Qwen2VLVideoProcessor.sample_frames (fps mode): total / source fps * fps frames,
    within [min_frames, max_frames], floored to a multiple of the temporal patch size."""
    import torch

    patch, min_frames = kwargs.get("temporal_patch_size", 2), kwargs.get("min_frames", 4)
    max_frames = math.floor(min(kwargs.get("max_frames", 768), total) / patch) * patch
    n = min(max(total / source_fps * fps, min_frames), max_frames, total)
    n = math.floor(n / patch) * patch
    # float32 steps, as transformers computes them (float64 lands a frame off on some lengths)
    return torch.clamp(torch.arange(0, total, total / n).int(), max=total - 1).tolist()


def _qwen3_vl(total: int, source_fps: float, fps: float, kwargs: dict[str, Any]) -> list[int]:
    """transformers' Qwen3VLVideoProcessor.sample_frames: total / source fps * fps frames within
    [min_frames, max_frames], evenly spaced and rounded."""
    import numpy as np

    n = int(total / source_fps * fps)
    n = min(max(n, kwargs.get("min_frames", 4)), kwargs.get("max_frames", 768), total)
    return np.linspace(0, total - 1, n).round().astype(int).tolist()


def _glm4v(total: int, source_fps: float, fps: float, max_duration: float) -> list[int]:
    """transformers' Glm4vVideoProcessor.sample_frames: one frame per 1/fps seconds (the first frame
    at or after each step) up to max_duration; longer videos evenly over their whole length."""
    import numpy as np

    duration = total / source_fps
    if duration <= max_duration:
        return sorted({min(total - 1, math.ceil(i * source_fps / fps)) for i in range(math.floor(duration * fps))})
    n = int(max_duration * fps)
    if n >= total:
        return list(range(total))
    return sorted({min(total - 1, math.ceil(t * source_fps)) for t in np.linspace(0, duration, n)})


def loader_metadata(decoded: Decoded, indices: list[int]) -> dict[str, Any]:
    """The metadata vLLM's loader hands the processor with the frames (processors that take
    none drop it): the source's frame count, fps and duration, and the frames taken."""
    return {"total_num_frames": decoded.frame_count, "fps": decoded.fps,
            "duration": decoded.frame_count / decoded.fps if decoded.fps > 0 else 0,
            "video_backend": "opencv", "frames_indices": list(indices),
            "do_sample_frames": len(indices) == decoded.frame_count}


@dataclass
class VideoFile:
    """One clip as a file and as the frames a server should take from it."""

    data: bytes
    decoded: Decoded
    loader: str
    indices: list[int]

    @property
    def url(self) -> str:
        return data_url(self.data)

    def item(self) -> tuple[Any, dict[str, Any]]:
        """The offline engine's `multi_modal_data["video"]`: the sampled frames with the loader's metadata."""
        return self.decoded.frames[self.indices], loader_metadata(self.decoded, self.indices)


def video_file(frames, server_loader: str, video_kwargs: dict[str, Any] | None = None) -> VideoFile:
    """Write `frames` as an mp4, decode it back, and sample it as a server whose media connector
    picks `server_loader` (`adapter.video.video_loader`) would with these `--media-io-kwargs` video
    kwargs. Raises VideoFileUnavailable, LoaderNotModelled."""
    video_kwargs = dict(video_kwargs or {})
    codec = video_kwargs.pop("backend", "opencv")
    if codec != "opencv":
        raise LoaderNotModelled(f"the server decodes videos with {codec} (--media-io-kwargs), vlcheck with opencv")
    loader = video_kwargs.pop("video_backend", None) or server_loader
    data = write_mp4(frames)
    decoded = decode_mp4(data)
    return VideoFile(data, decoded, loader, sampled_indices(loader, decoded, video_kwargs))
