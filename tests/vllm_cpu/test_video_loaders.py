"""`video_loaders`: vLLM's video loaders with every codec it ships over the container files vlcheck
writes (vlcheck/cpu/video_loaders.py), and the container files' own truth."""

import sys

import pytest

from vlcheck.core import video_containers
from vlcheck.core.results import Status
from vlcheck.runners.testing import require_ok, run_check
from vlcheck.spec.registry import all_families


def test_video_loaders_decode_the_files_truth(family, variant, request):
    result = run_check(request, "video_loaders", family, variant)
    if result is None:  # compared with --vlcheck-baseline
        return
    require_ok(result, variant)


@pytest.fixture(scope="module")
def containers():
    pytest.importorskip("av", reason="PyAV (`av`) writes the container files and is not installed")
    return {c.name: c for c in video_containers.containers()}


def test_every_container_holds_its_truth(containers):
    for name, container in containers.items():
        probed = video_containers.probe(container.data)
        frames = probed["frames"]
        assert [f["index"] for f in frames] == list(range(video_containers.FRAMES)), f"{name}: frames out of order"
        # WebM keeps milliseconds
        assert all(abs(f["pts"] - t) < 1e-3 for f, t in zip(frames, container.pts)), f"{name}: pts {frames}"
        keys = [i for i, f in enumerate(frames) if f["key"]]
        assert keys == ([0] if name == "sparse_keyframes" else [0, 12, 24, 36]), f"{name}: keyframes {keys}"
        assert all(f["interlaced"] for f in frames) == (name == "interlaced"), f"{name}: interlacing"
        assert video_containers.write(container.spec) == container.data, f"{name}: its bytes are not deterministic"
    steps = {round(b - a, 4) for a, b in zip(containers["vfr"].pts, containers["vfr"].pts[1:])}
    assert steps == {round(1 / 24, 4), round(1 / 8, 4)}
    assert probed["header"]["codec"] == "h264" and video_containers.probe(containers["webm_vp9"].data)["header"]["codec"] == "vp9"


def test_a_frame_reads_as_its_index_and_a_broken_one_as_none():
    import numpy as np

    rng = np.random.default_rng(0)
    for index in (0, 1, 37, 47, 255):
        noisy = video_containers.frame_pixels(index).astype(int) + rng.integers(-40, 40, (64, 128, 3))
        assert video_containers.frame_index(np.clip(noisy, 0, 255)) == index
    assert video_containers.frame_index(np.zeros((64, 128, 3), np.uint8)) is None
    assert video_containers.frame_index(np.full((64, 128, 3), 128, np.uint8)) is None


def _qwen2_vl():
    spec = all_families().get("qwen2_vl")
    return spec, next(v for v in spec.variants if "video" in v.modalities)


def test_a_loader_off_by_one_fails_naming_family_and_loader(containers, monkeypatch):
    from vlcheck.cpu.video_loaders import video_loaders_check

    video = pytest.importorskip("vllm.multimodal.video")
    loader = video.VIDEO_LOADER_REGISTRY.name2class["qwen2_vl"]
    original = loader.compute_frames_index_to_sample.__func__

    def off_by_one(cls, source, target, **kwargs):
        return [min(i + 1, source.total_frames_num - 1) for i in original(cls, source, target, **kwargs)]

    monkeypatch.setattr(loader, "compute_frames_index_to_sample", classmethod(off_by_one))
    spec, variant = _qwen2_vl()
    result = video_loaders_check(spec, variant)
    if result.status is Status.SKIP:
        pytest.skip(result.reason)
    assert result.status is Status.FAIL, result.reason
    assert result.reason.startswith("qwen2_vl [single] qwen2_vl loader, opencv codec, mp4_h264: sampled frames "
                                    "[1, 7, 13, 19, 25, 31, 37, 43]"), result.reason


def test_a_codec_whose_library_is_missing_skips_naming_it(monkeypatch):
    from vlcheck.adapter import video

    pytest.importorskip("vllm")
    monkeypatch.setitem(sys.modules, "av", None)
    assert "its library av is not installed" in video.codec_unavailable("pyav")


def test_without_pyav_the_check_skips_saying_why(monkeypatch):
    from vlcheck.cpu.video_loaders import video_loaders_check

    monkeypatch.setitem(sys.modules, "av", None)
    spec, variant = _qwen2_vl()
    result = video_loaders_check(spec, variant)
    assert result.status is Status.SKIP and "PyAV (`av`) is not installed" in result.reason, result.reason
