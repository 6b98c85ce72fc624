"""`tiling`: images at sizes past every family's tile, grid and resolution bounds, through vLLM's
processor with its cache off, on (first and served from the cache) and transformers' processor
(vlcheck/cpu/tiling.py; `vlcheck/snapshots/test_tiling/<config>.txt`)."""

from vlcheck.cpu import tiling
from vlcheck.runners.testing import assert_check_as_snapshot


def test_images_that_tile_take_every_path_alike(family, variant, family_snapshot, request):
    """The snapshot holds each request's token count and item placements (what a changed grid shows
    as); the check fails where the paths disagree, unless the spec declares `deviations.tiling`."""
    assert_check_as_snapshot(request, "tiling", family, variant, family_snapshot, "images that tile")


def test_the_sizes_cross_the_bounds_they_name():
    """wide and tall are one image transposed, past the largest base tile (896 px, Gemma 3) on their
    long side; small is under Qwen-VL's min_pixels (3136), the bound that scales an image up."""
    wide, tall, small = (tiling.TILING_SIZES[n] for n in ("wide", "tall", "small"))
    assert tall == wide[::-1] and wide[0] > 896 and wide[0] / wide[1] >= 3
    assert small[0] * small[1] < 3136


def test_a_message_in_a_snapshot_names_no_machine_path():
    """CI's checkpoint and HF caches lie elsewhere than the machine that recorded the snapshots."""
    err = ValueError("Unrecognized image processor in /root/.cache/vlcheck/checkpoints/glm4v-f562d1. See https://hf.co/a/b")
    assert tiling._head(err) == "ValueError: Unrecognized image processor in <path> See https://hf.co/a/b"
