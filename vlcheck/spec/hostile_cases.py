"""The bad and hostile inputs, by name: what a spec's `known_broken` table may name, and what each
case sends instead of the example's question or media. `vlcheck.hostile.inputs` runs them and
classifies the outcomes; adding a case is adding it here.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from vlcheck.core import media
from vlcheck.spec.schema import KINDS, Variant

OTHER_PLACEHOLDERS = ("<image>", "<|image_pad|>", "<start_of_image>", "[IMG]", "<|image|>", "<video>")


@dataclass(frozen=True)
class Case:
    name: str
    question: Callable[[Variant, str], str] | None = None
    """The question to ask instead of the example's (given the variant and its modality)."""

    data: Callable[[Variant, str], tuple[str, Any, int]] | None = None
    """The (modality, multi_modal_data value, number of items) to send instead of one test item."""

    examples: tuple[str, ...] = KINDS
    """The kinds of example (`Variant.kind`) it is about: a case of images is not listed for the
    audio example, nor a case of clips for the visual ones."""

    def applies_to(self, variant: Variant) -> bool:
        return variant.kind in self.examples


def _placeholder(variant: Variant, modality: str) -> str:
    return variant.modalities[modality].render(1) or "<image>"


def _image(mode: str, size=(224, 224)):
    return lambda v, m: ("image", _same_image(mode, size), 1)


@lru_cache(maxsize=None)
def _same_image(mode: str, size: tuple[int, int]):
    """Made once per process and shared by every family (the 64-megapixel one takes 0.3 s); the
    cases only read it."""
    return media.image(3, size, mode)


def _truncated_jpeg(v, m):
    from PIL import Image

    buf = io.BytesIO()
    media.image(4).save(buf, "JPEG")
    return "image", Image.open(io.BytesIO(buf.getvalue()[: len(buf.getvalue()) // 3])), 1


def _sixteen_bit(v, m):
    import numpy as np
    from PIL import Image

    return "image", Image.fromarray((np.arange(224 * 224, dtype=np.uint16).reshape(224, 224) * 3)), 1


def _rgba(v, m):
    img = media.image(5).convert("RGBA")
    img.putalpha(80)
    return "image", img, 1


def _video(frames: int):
    def data(v: Variant, m: str):
        if "video" not in v.modalities:
            return None
        clip = media.video(7, frames=frames)
        return "video", ((clip, media.video_metadata(frames)) if v.modalities["video"].video_metadata else clip), 1
    return data


def _audio(seconds: float, amplitude: float = 1.0, rate: int = media.AUDIO_RATE):
    """A 1.5 s clip's case is comparable with the example's clip: the same token count means the
    processor took it as 1.5 s (an 8 kHz clip resampled, not read as 0.75 s at 16 kHz)."""
    def data(v: Variant, m: str):
        samples, rate_ = media.audio(6, seconds, rate)
        return "audio", (samples * amplitude, rate_), 1
    return data


def _over_limit(v: Variant, m: str):
    limit = (v.limit_for(m, v.most_items) or {}).get(m, 1)
    return m, media.items(m, limit + 1), limit + 1


def _unsupported_modality(v: Variant, m: str):
    other = "video" if "video" not in v.modalities else "image"  # the audio example: video
    if other in v.modalities:
        return None
    return other, media.items(other, 1)[0], 1


VISUAL_EXAMPLES = ("single", "multi_image")
AUDIO_EXAMPLES = ("audio",)

CASES: tuple[Case, ...] = (
    Case("own placeholder in question", question=lambda v, m: f"What is {_placeholder(v, m)} here?"),
    Case("other families' placeholders in question", question=lambda v, m: "Compare " + " and ".join(
        p for p in OTHER_PLACEHOLDERS if p != _placeholder(v, m)) + "."),
    Case("empty question", question=lambda v, m: ""),
    Case("100k-character question", question=lambda v, m: "why " * 25_000),
    Case("unicode, right-to-left, NUL and control characters",
         question=lambda v, m: "¿Qué? 你好 مرحبا بالعالم \u202eevil\u202c \x00\x01\x07\x1b[31m\t\r\n end"),
    Case("1x1 image", data=_image("RGB", (1, 1)), examples=VISUAL_EXAMPLES),
    Case("1x8000 image", data=_image("RGB", (1, 8000)), examples=VISUAL_EXAMPLES),
    Case("8000x1 image", data=_image("RGB", (8000, 1)), examples=VISUAL_EXAMPLES),
    Case("64-megapixel image", data=_image("RGB", (8000, 8000)), examples=VISUAL_EXAMPLES),
    Case("grayscale (L) image", data=_image("L"), examples=VISUAL_EXAMPLES),
    Case("palette (P) image", data=_image("P"), examples=VISUAL_EXAMPLES),
    Case("RGBA image with transparency", data=_rgba, examples=VISUAL_EXAMPLES),
    Case("CMYK image", data=_image("CMYK"), examples=VISUAL_EXAMPLES),
    Case("16-bit image", data=_sixteen_bit, examples=VISUAL_EXAMPLES),
    Case("truncated JPEG", data=_truncated_jpeg, examples=VISUAL_EXAMPLES),
    Case("1-frame video", data=_video(1), examples=VISUAL_EXAMPLES),
    Case("256-frame video", data=_video(256), examples=VISUAL_EXAMPLES),
    Case("silent audio", data=_audio(1.5, amplitude=0.0), examples=AUDIO_EXAMPLES),
    Case("clipping audio (samples far beyond +-1)", data=_audio(1.5, amplitude=40.0), examples=AUDIO_EXAMPLES),
    Case("1.5 s at 8 kHz (not the processor's rate)", data=_audio(1.5, rate=8000), examples=AUDIO_EXAMPLES),
    Case("one-sample audio", data=_audio(1 / media.AUDIO_RATE), examples=AUDIO_EXAMPLES),
    Case("ten-minute audio", data=_audio(600.0), examples=AUDIO_EXAMPLES),
    Case("more items than limit_mm_per_prompt", data=_over_limit),
    Case("modality the family does not take", data=_unsupported_modality),
)
