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
from vlcheck.spec.schema import Variant

OTHER_PLACEHOLDERS = ("<image>", "<|image_pad|>", "<start_of_image>", "[IMG]", "<|image|>", "<video>")


@dataclass(frozen=True)
class Case:
    name: str
    question: Callable[[Variant, str], str] | None = None
    """The question to ask instead of the example's (given the variant and its modality)."""

    data: Callable[[Variant, str], tuple[str, Any, int]] | None = None
    """The (modality, multi_modal_data value, number of items) to send instead of one test item."""


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


def _over_limit(v: Variant, m: str):
    limit = (v.limit_for(m, v.max_images or 1) or {}).get(m, 1)
    return m, media.items(m, limit + 1), limit + 1


def _unsupported_modality(v: Variant, m: str):
    other = "video" if "video" not in v.modalities else "image"
    if other in v.modalities:
        return None
    return other, media.items(other, 1)[0], 1


CASES: tuple[Case, ...] = (
    Case("own placeholder in question", question=lambda v, m: f"What is {_placeholder(v, m)} here?"),
    Case("other families' placeholders in question", question=lambda v, m: "Compare " + " and ".join(
        p for p in OTHER_PLACEHOLDERS if p != _placeholder(v, m)) + "."),
    Case("empty question", question=lambda v, m: ""),
    Case("100k-character question", question=lambda v, m: "why " * 25_000),
    Case("unicode, right-to-left, NUL and control characters",
         question=lambda v, m: "¿Qué? 你好 مرحبا بالعالم \u202eevil\u202c \x00\x01\x07\x1b[31m\t\r\n end"),
    Case("1x1 image", data=_image("RGB", (1, 1))),
    Case("1x8000 image", data=_image("RGB", (1, 8000))),
    Case("8000x1 image", data=_image("RGB", (8000, 1))),
    Case("64-megapixel image", data=_image("RGB", (8000, 8000))),
    Case("grayscale (L) image", data=_image("L")),
    Case("palette (P) image", data=_image("P")),
    Case("RGBA image with transparency", data=_rgba),
    Case("CMYK image", data=_image("CMYK")),
    Case("16-bit image", data=_sixteen_bit),
    Case("truncated JPEG", data=_truncated_jpeg),
    Case("1-frame video", data=_video(1)),
    Case("256-frame video", data=_video(256)),
    Case("more items than limit_mm_per_prompt", data=_over_limit),
    Case("modality the family does not take", data=_unsupported_modality),
)
