"""The path a running engine took, read in its workers (`LLM.collective_rpc`, which ships these
functions to the engine core: VLLM_ALLOW_INSECURE_SERIALIZATION=1, as test engines set it):
the attention backends its layers chose, its compilation and CUDA-graph settings, and per model
step whether a CUDA graph replayed it and whether it computed media (an image prefill).

The model runner's private `_determine_batch_execution_and_padding` (vLLM 0.24's GPU and CPU model
runners) decides each step's CUDA-graph mode from the step's token count and its requests with
encoder inputs; the second model runner (`VLLM_USE_V2_MODEL_RUNNER=1`) decides it in its module's
`dispatch_cg_and_sync_dp`, and reads the step's encoder inputs in `execute_model`. They are wrapped,
not copied. A vLLM with neither says so (`StepsUnreadable`): the configuration that needs the steps
then skips saying why.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

STEP_HOOK = "_determine_batch_execution_and_padding"
V2_STEP_HOOK = "dispatch_cg_and_sync_dp"

VISION_ATTENTION_CLASSES = ("MMEncoderAttention", "MultiHeadAttention")
"""vLLM's attention layers for encoders without a KV cache (vision towers; 0.24 and before)."""


class StepsUnreadable(RuntimeError):
    """This vLLM's model runner does not expose the step decision vlcheck records."""


def vllm_has_variable(name: str) -> bool:
    """Whether the installed vLLM reads environment variable `name` (one of `vllm.envs`' variables)."""
    import vllm.envs

    return name in getattr(vllm.envs, "environment_variables", {})


def attention_backends(model) -> dict[str, list[str]]:
    """In a worker: the backend each attention layer of the loaded model runs, split into the
    vision encoder's (`MMEncoderAttention`: an enum member) and the decoder's (`Attention`: a
    backend class), each sorted and unique."""
    found: dict[str, set[str]] = {"vision_encoder": set(), "decoder": set()}
    for module in model.modules():
        backend = getattr(module, "attn_backend", None)
        if backend is None:
            continue
        name = backend.get_name() if hasattr(backend, "get_name") else getattr(backend, "name", str(backend))
        part = "vision_encoder" if type(module).__name__ in VISION_ATTENTION_CLASSES else "decoder"
        found[part].add(str(name))
    return {part: sorted(names) for part, names in found.items()}


def compilation(worker) -> dict[str, object]:
    """In a worker: the compilation mode and CUDA-graph mode the engine resolved, and its capture sizes."""
    runner = worker.model_runner
    config = runner.compilation_config
    sizes = list(getattr(config, "cudagraph_capture_sizes", None) or [])
    return {"mode": _name(getattr(config, "mode", None)), "cudagraph_mode": _name(getattr(config, "cudagraph_mode", None)),
            "capture_sizes": len(sizes), "largest_capture_size": max(sizes, default=0),
            "model_runner": f"{type(runner).__module__}.{type(runner).__name__}"}


def _name(value) -> str:
    return getattr(value, "name", None) or str(value)


def start_recording_steps(worker) -> None:
    """In a worker: from now on, record every model step's CUDA-graph mode, token count (as
    scheduled and as padded for a graph) and requests with encoder inputs."""
    runner = worker.model_runner
    if "_vlcheck_steps" in runner.__dict__:
        runner._vlcheck_steps.clear()
        return
    steps: list[tuple[str, int, int, int]] = []
    module = sys.modules.get(type(runner).__module__)
    if getattr(runner, STEP_HOOK, None) is not None:
        _record_v1(runner, steps)
    elif getattr(module, V2_STEP_HOOK, None) is not None:
        _record_v2(runner, module, steps)
    else:
        raise StepsUnreadable(f"{type(runner).__module__}.{type(runner).__name__} has neither {STEP_HOOK} nor a "
                              f"module-level {V2_STEP_HOOK}")
    runner._vlcheck_steps = steps


def _record_v1(runner, steps: list) -> None:
    decide = getattr(runner, STEP_HOOK)

    def recorded(*args, **kwargs):
        result = decide(*args, **kwargs)
        mode, batch = result[0], result[1]
        tokens = kwargs.get("num_tokens", args[0] if args else 0)
        steps.append((_name(mode), int(tokens), int(batch.num_tokens), int(kwargs.get("num_encoder_reqs", 0))))
        return result

    setattr(runner, STEP_HOOK, recorded)


def _record_v2(runner, module, steps: list) -> None:
    """The second model runner: its module's dispatch gives the mode; `execute_model` the step's encoder inputs."""
    dispatch, execute = getattr(module, V2_STEP_HOOK), runner.execute_model
    encoder_reqs = [0]

    def executing(scheduler_output, *args, **kwargs):
        encoder_reqs[0] = len(getattr(scheduler_output, "scheduled_encoder_inputs", None) or {})
        return execute(scheduler_output, *args, **kwargs)

    def dispatched(*args, **kwargs):
        result = dispatch(*args, **kwargs)
        batch = result[0]
        tokens = kwargs.get("num_tokens", args[2] if len(args) > 2 else 0)
        steps.append((_name(batch.cg_mode), int(tokens), int(batch.num_tokens), encoder_reqs[0]))
        encoder_reqs[0] = 0
        return result

    runner.execute_model = executing
    setattr(module, V2_STEP_HOOK, dispatched)


def recorded_steps(worker) -> list[tuple[str, int, int, int]]:
    """In a worker: the steps recorded since `start_recording_steps`."""
    return list(getattr(worker.model_runner, "_vlcheck_steps", []))


@dataclass(frozen=True)
class Steps:
    """What the model steps of a run show (the first worker's: every rank runs the same steps)."""

    steps: list[tuple[str, int, int, int]]

    @property
    def media_steps(self) -> list[tuple[str, int, int, int]]:
        """The steps that computed media (their requests' encoder inputs): image prefills."""
        return [s for s in self.steps if s[3] > 0]

    @property
    def replayed_media_steps(self) -> int:
        """Image prefills a CUDA graph replayed (mode PIECEWISE or FULL)."""
        return sum(1 for s in self.media_steps if s[0] not in ("NONE", "None"))

    @property
    def replayed_steps(self) -> int:
        return sum(1 for s in self.steps if s[0] not in ("NONE", "None"))

    def summary(self) -> dict[str, object]:
        media = self.media_steps
        return {"steps": len(self.steps), "graph_replays": self.replayed_steps,
                "image_prefill_steps": len(media), "image_prefill_replays": self.replayed_media_steps,
                "largest_image_prefill_tokens": max((s[1] for s in media), default=0)}


def read_path(llm) -> dict[str, object]:
    """The engine's backends and compilation, from its first worker (raises what vLLM raised)."""
    return {"attention_backends": llm.apply_model(attention_backends)[0],
            "compilation": llm.collective_rpc(compilation)[0]}


def start_steps(llm) -> None:
    """Start recording in every worker; raises StepsUnreadable (re-raised from the worker's error)."""
    try:
        llm.collective_rpc(start_recording_steps)
    except Exception as err:  # noqa: BLE001 - a worker's exception arrives wrapped; its text names the cause
        if "StepsUnreadable" in str(err) or STEP_HOOK in str(err):
            raise StepsUnreadable(str(err)) from err
        raise


def steps(llm) -> Steps:
    return Steps(llm.collective_rpc(recorded_steps)[0])
