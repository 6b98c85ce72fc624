"""Test images, videos and audio clips the suite generates itself: deterministic, nothing downloaded."""

from __future__ import annotations

from typing import Any

# (width, height): square, landscape, portrait, small and odd-sized, as the examples' real images vary.
IMAGE_SIZES = ((224, 224), (320, 240), (240, 320), (64, 48), (333, 197))


def image(index: int = 0, size: tuple[int, int] | None = None, mode: str = "RGB"):
    """A gradient image whose pixels depend on `index`, so different items hash differently."""
    import numpy as np
    from PIL import Image

    w, h = size or IMAGE_SIZES[index % len(IMAGE_SIZES)]
    if w * h > 1 << 22:  # huge images: draw at 1/16 and upscale (an int64 grid would take GBs)
        return image(index, (max(w // 16, 1), max(h // 16, 1)), mode).resize((w, h), Image.NEAREST)
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([(x * 255 // max(w - 1, 1) + index * 37) % 256,
                    (y * 255 // max(h - 1, 1) + index * 91) % 256,
                    ((x + y) * 3 + index * 53) % 256], axis=-1).astype("uint8")
    return Image.fromarray(rgb, "RGB").convert(mode)


def repeated_with_one_pixel_changed(base, i: int):
    """The example's cache-miss simulation: a copy of `base` with pixel (0, 0) set from `i`."""
    copy = base.copy()
    copy.putpixel((0, 0), (i // 256 // 256, i // 256 % 256, i % 256))
    return copy


def video(index: int = 0, frames: int = 8, size: tuple[int, int] = (64, 48)):
    """A video as the examples pass it: a (frames, height, width, 3) uint8 array."""
    import numpy as np

    return np.stack([np.asarray(image(index * 100 + f, size)) for f in range(frames)])


def video_metadata(frames: int, fps: float = 2.0) -> dict[str, Any]:
    """The metadata the examples send with videos for the families that need it."""
    return {"fps": fps, "duration": frames / fps, "total_num_frames": frames,
            "frames_indices": list(range(frames)), "video_backend": "opencv", "do_sample_frames": False}


AUDIO_RATE = 16000
"""Hz: what the examples' clips are resampled to by most audio processors (Whisper's feature extractor)."""


def audio(index: int = 0, seconds: float = 1.5, rate: int = AUDIO_RATE):
    """A clip as the audio example passes it (`AudioAsset.audio_and_sample_rate`): (float32 samples,
    rate). Two tones whose pitches depend on `index`, so different clips hash and sound differently."""
    import numpy as np

    t = np.arange(int(seconds * rate), dtype=np.float64) / rate
    samples = 0.3 * np.sin(2 * np.pi * (220 + 37 * index) * t) + 0.2 * np.sin(2 * np.pi * (660 + 91 * index) * t)
    return samples.astype(np.float32), rate


def items(modality: str, count: int, with_metadata: bool = False, offset: int = 0) -> list[Any]:
    """`count` distinct items of a modality, as vLLM's multi_modal_data takes them."""
    if modality == "image":
        return [image(offset + i) for i in range(count)]
    if modality == "audio":
        return [audio(offset + i) for i in range(count)]
    clips = [video(offset + i) for i in range(count)]
    return [(clip, video_metadata(len(clip))) for clip in clips] if with_metadata else clips
