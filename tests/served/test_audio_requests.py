"""Audio as the served path sends it: the offline clip, losslessly, as an `audio_url` data URL."""

import pytest

from vlcheck.core import media
from vlcheck.served.requests import data_url, media_part


def test_a_clip_reaches_vllm_as_the_same_samples_at_its_rate():
    np = pytest.importorskip("numpy")
    pytest.importorskip("av")
    audio_io = pytest.importorskip("vllm.multimodal.media.audio")
    samples, rate = media.audio(3, rate=8000)
    url = data_url("audio", (samples, rate))
    assert url.startswith("data:audio/wav;base64,")
    decoded, decoded_rate = audio_io.AudioMediaIO().load_base64("audio/wav", url.split(",", 1)[1])
    assert decoded_rate == 8000 and decoded.shape == samples.shape
    assert np.array_equal(decoded, samples)
    assert media_part("audio", url, "clip-1") == {"type": "audio_url", "audio_url": {"url": url}, "uuid": "clip-1"}


def test_clips_differ_by_index_and_keep_their_length():
    first, second = media.audio(0), media.audio(1)
    assert first[1] == second[1] == media.AUDIO_RATE and len(first[0]) == int(1.5 * media.AUDIO_RATE)
    assert (first[0] != second[0]).any()


def test_without_pyav_audio_is_unsendable_and_says_why(monkeypatch):
    """A GPU runner's bundle installed vlcheck with --no-deps and no PyAV: the engine tier's served audio
    tests then crashed on `import av` (10 of qwen2_5_omni-audio's, an H200, 2026-11-30); they skip saying why."""
    import sys

    from vlcheck.served.requests import unsendable

    assert unsendable("audio") is None and unsendable("image") is None
    monkeypatch.setitem(sys.modules, "av", None)
    why = unsendable("audio")
    assert why is not None and "PyAV" in why and "pip install av" in why
    assert unsendable("image") is None and unsendable("video") is None
