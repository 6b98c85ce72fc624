"""The example's requests as OpenAI chat completions: typed `text`, `image_url`, `video_url` and
`audio_url` parts with base64 data URLs, as a user's client sends them.

Images go as PNG (lossless: the server decodes exactly the pixels the offline path is given);
videos as vLLM's `video/jpeg` data URL, the frames as comma-separated base64 JPEGs (the one video
format vLLM decodes without a video library); audio as float32 WAV (lossless: the samples the
offline path is given, at their rate). The text is the example's question; media parts
come where the example's messages put them (string-content examples: before the text, where
vLLM's chat API puts the placeholders of a string-format template).
"""

from __future__ import annotations

import base64
import io
from typing import Any

from vlcheck.core import media
from vlcheck.prompt.render import messages as example_messages
from vlcheck.spec.schema import Variant

URL_KEYS = {"image": "image_url", "video": "video_url", "audio": "audio_url"}


def png_bytes(image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def bytes_data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def png_data_url(image) -> str:
    return bytes_data_url(png_bytes(image), "image/png")


def jpeg_base64(image) -> str:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, "JPEG", quality=95)
    return base64.b64encode(buf.getvalue()).decode()


def video_data_url(frames) -> str:
    from PIL import Image

    return "data:video/jpeg;base64," + ",".join(jpeg_base64(Image.fromarray(f)) for f in frames)


def wav_bytes(samples, rate: int) -> bytes:
    """Mono float32 WAV written by PyAV (FFmpeg's pcm_f32le)."""
    import av
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format="wav") as out:
        stream = out.add_stream("pcm_f32le", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.asarray(samples, np.float32).reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    return buf.getvalue()


def unsendable(modality: str) -> str | None:
    """Why this install cannot send `modality` over the API, or None: audio goes as a WAV that PyAV
    writes (a dependency of vlcheck; an install made with --no-deps, as a GPU runner's bundle may be,
    can lack it), and PyAV is also one of the two libraries vLLM decodes it with."""
    if modality != "audio":
        return None
    try:
        import av  # noqa: F401
    except ImportError as err:
        return (f"audio goes over the API as a WAV file written with PyAV, which this install lacks ({err}): "
                "install vlcheck with its dependencies (`pip install vlcheck`, or `pip install av`)")
    return None


def data_url(modality: str, item: Any) -> str:
    if modality == "image":
        return png_data_url(item)
    if modality == "audio":
        return bytes_data_url(wav_bytes(*item), "audio/wav")
    return video_data_url(item[0] if isinstance(item, tuple) else item)


def media_part(modality: str, url: str | None, uuid: str | None = None) -> dict[str, Any]:
    """One OpenAI content part; `url=None` with a uuid is the empty part that names a cached item."""
    key = URL_KEYS[modality]
    part: dict[str, Any] = {"type": key, key: None if url is None else {"url": url}}
    if uuid is not None:
        part["uuid"] = uuid
    return part


def items(variant: Variant, modality: str, count: int) -> list[Any]:
    """The same items the offline processor check is given (`vlcheck.prompt.requests.media_data`)."""
    return media.items(modality, count, variant.modalities[modality].video_metadata)


def chat_messages(variant: Variant, modality: str, question: str, count: int,
                  uuids: list[str] | None = None, urls: list[str | None] | None = None) -> list[dict[str, Any]]:
    """The example's chat request with its media as data URLs (or the given `urls`; None = empty part)."""
    if urls is None:
        urls = [data_url(modality, item) for item in items(variant, modality, count)]
    parts = [media_part(modality, url, uuids[i] if uuids else None) for i, url in enumerate(urls)]
    out = []
    for message in example_messages(variant, modality, question, count):
        content = message["content"]
        if message["role"] != "user":
            out.append(message)
            continue
        if isinstance(content, str):
            typed = [*parts, {"type": "text", "text": question}]
        else:
            media_left = iter(parts)
            typed = [{"type": "text", "text": p["text"]} if p["type"] == "text" else next(media_left) for p in content]
        out.append({"role": "user", "content": typed})
    return out
