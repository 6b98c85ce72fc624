"""Engine args that vLLM renamed or removed, and what to write instead.

Consulted when a spec's engine arg is not a field of the installed vLLM's EngineArgs, so that the
failure says how to migrate rather than only that the arg is unknown.
"""

ENGINE_ARG_MIGRATIONS: dict[str, str] = {
    "disable_mm_preprocessor_cache": "mm_processor_cache_gb=0 (to disable the cache; its size in GiB otherwise)",
    "speculative_model": "speculative_config={'model': ...}",
    "num_speculative_tokens": "speculative_config={'num_speculative_tokens': ...}",
    "guided_decoding_backend": "structured_outputs_config={'backend': ...}",
    "worker_use_ray": "distributed_executor_backend='ray'",
    "use_v2_block_manager": "(nothing: the v2 block manager is the only one; remove the arg)",
}


def migration_hint(arg: str) -> str | None:
    return ENGINE_ARG_MIGRATIONS.get(arg)


SERVE_FLAG_HINTS: dict[str, str] = {
    "disable_mm_preprocessor_cache": "--mm-processor-cache-gb 0 (to disable the cache; its size in GiB otherwise)",
    # vLLM 0.10 made the multimodal flags JSON; the old key=value form is rejected at parse time.
    "limit_mm_per_prompt": "a JSON object: --limit-mm-per-prompt '{\"image\": 2}' (the image=2 form was removed in vLLM 0.10)",
    "mm_processor_kwargs": "a JSON object: --mm-processor-kwargs '{\"max_pixels\": 1003520}'",
    "task": "--runner (generate, pooling) and --convert (the --task flag was replaced)",
}


def serve_flag_hint(flag: str) -> str | None:
    """What to write instead of a `vllm serve` flag (`--limit-mm-per-prompt`) the installed vLLM
    rejects: the engine-arg migration of the same name, or how its value is written now."""
    key = flag.lstrip("-").replace("-", "_")
    return SERVE_FLAG_HINTS.get(key) or ENGINE_ARG_MIGRATIONS.get(key)
