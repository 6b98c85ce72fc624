"""With the processor cache off (mm_processor_cache_gb=0), empty media cannot be served: there is
nothing to look the uuid up in. vLLM 0.24.0 says so obscurely ("Failed to apply partial on
data={'images': [None]}"); the suite states the reason. Starts a second engine per family:
only with --vlcheck-cache-off."""

import pytest

from vlcheck.engine.runs import still_serves, unknown_uuid_error

pytestmark = [pytest.mark.engine, pytest.mark.sends("image", "video", "audio")]  # on GPUs (gpu) and on vLLM's CPU build (cpu_engine): the pytest plugin


def test_empty_media_rejected_without_cache(family, variant, engine_cache_off):
    error = unknown_uuid_error(family, variant, engine_cache_off)
    assert error is not None, (f"{family.name}: with the processor cache disabled, a request with empty media "
                               "was accepted; it can only be answered from the cache")
    assert still_serves(family, variant, engine_cache_off)
