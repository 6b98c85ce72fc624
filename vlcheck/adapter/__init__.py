"""Every use of vLLM's and transformers' internals, in one place, one module per concern.

vlcheck gates upgrades, so it has to run on the release it judges. Public APIs (`LLM`,
`EngineArgs`, `SamplingParams`, `get_metrics`, `AutoConfig`, `AutoProcessor`,
`PreTrainedTokenizerFast`, config classes) may be used anywhere; anything else goes through here.
Where an internal API moved, its module holds one small shim per API generation and picks one by
feature detection (a signature, an attribute, an import), not by comparing version strings.
`describe()` names the generation picked for each API; the report's environment shows it. A shim
that finds no generation it knows raises `SuiteError`: the check is an `error` (vlcheck's), not
a `fail` (vLLM's).

Shims (API: generations, with the versions measured to need them):

- processor cache (`processor.py`): vllm 0.24 binds it in `create_processor(config, cache=...)`
  and, uncached, runs the HF processor on text and media together; vllm 0.32 takes it per call
  (`processor(..., cache=...)`) and never shows the HF processor the prompt.
- auto processor tables (`hf_classes.py`): transformers 5.16 names video processors as strings;
  5.19 keys them by backend (`{"torchvision": name}`), as image processors already were.
- engine shutdown (`engine.py`): `llm.llm_engine.engine_core.shutdown()` on vllm 0.24 and 0.32
  (no public `LLM.shutdown()`; used when one appears).
- tokenizer modes (`engine.py`): `tokenizer_mode` is typed `TokenizerMode | str` and checked against
  `vllm.tokenizers.TokenizerRegistry` when the tokenizer loads, on vllm 0.24 and 0.33 (one
  generation). The other values vLLM allows engine args (`engine_arg_values`) are read generically:
  `Literal` and enum types of EngineArgs fields and the `choices=` of vLLM's CLI parser
  (`EngineArgs.add_cli_args(FlexibleArgumentParser())`, `vllm.utils.argparse_utils` on 0.24, 0.33).
- unchanged on vllm 0.24 and 0.32 / transformers 5.16 and 5.19, one generation each: engine
  cleanup and LoRA requests (`engine.py`), chat-template fallbacks, content-format detection and
  Jinja rendering (`chat.py`), the model registry (`models.py`), vLLM's own config classes
  (`configs.py`), tokenizer special-token names (`hf_classes.py`).
- `numerics.py`: the internals numerical conformance needs (its own docstring lists them).
- the live engine's model (`engine.py`): `LLM.apply_model` ships a vlcheck function to each worker
  (the loaded layers' quantization methods; a projector's output scaled for the goldens' power test),
  which vllm 0.24-0.33 allow with VLLM_ALLOW_INSECURE_SERIALIZATION=1. The model registry's
  `_run_in_subprocess` (`models.py`, vllm 0.24-0.33) runs in this process where no GPU is visible.
- the shared engine (`shared_engine.py`): `LLM`'s own rendering steps (`OfflineInferenceMixin`,
  `vllm.entrypoints.offline_utils` on vllm 0.24, `vllm.entrypoints.common.offline` on 0.32) applied to
  an AsyncLLM, and `vllm serve`'s engine and app builders (`vllm.entrypoints.openai.api_server` on
  0.24, `vllm.entrypoints.launchers.api_server.entry` on 0.32).
- servers (`render_server.py`, `serve_args.py`): vLLM's CLI entry point (`vllm.entrypoints.cli.main`)
  and its `serve` subcommand's parser (`ServeSubcommand.subparser_init`), the same on vllm 0.24 and
  0.32 although the render server's module moved (`vllm.entrypoints.cli.launch` ->
  `vllm.entrypoints.launchers.render`); the CPU platform selected as `vllm bench` does.
"""

from __future__ import annotations

from vlcheck.adapter.chat import chat_template_content_format, chat_template_fallback, render_chat_template
from vlcheck.adapter.engine import (AllowedValues, engine_arg_types, engine_arg_values, forget_cached_environment,
                                    loaded_layer_kernels, loaded_layer_methods, lora_request, prepare_cpu_engine,
                                    release_engine_memory, shutdown_engine, version)
from vlcheck.adapter.models import (class_supports, is_multimodal_class, load_model_class, supported_architectures,
                                    takes_modality)
from vlcheck.adapter.processor import Processor, apply_processor, create_processor

__all__ = ["AllowedValues", "Processor", "apply_processor", "chat_template_content_format", "chat_template_fallback",
           "class_supports",
           "create_processor", "describe", "engine_arg_types", "engine_arg_values", "forget_cached_environment",
           "is_multimodal_class",
           "load_model_class", "loaded_layer_kernels", "loaded_layer_methods", "lora_request", "prepare_cpu_engine",
           "release_engine_memory",
           "render_chat_template", "shutdown_engine", "supported_architectures", "takes_modality", "version"]


def describe() -> dict[str, str]:
    """API -> the shim generation picked for the installed vLLM and transformers (detected now
    where not yet used; a detection that fails is named, never raised: the report must be written)."""
    from vlcheck.adapter import chat, engine, generations, hf_classes, processor, shared_engine, scheduler, video

    return generations.detect_all({
        "processor": processor.generation,
        "auto processor tables": hf_classes.generation,
        "engine shutdown": engine.shutdown_generation,
        "tokenizer modes": engine.tokenizer_mode_generation,
        "engine cleanup": engine.cleanup_generation,
        "chat content format": chat.content_format_generation,
        "scheduler steps": scheduler.generation,
        "video loader": video.generation,
        "cpu kv block size": engine.cpu_kv_block_generation,
        "shared engine": shared_engine.generation,
    })
