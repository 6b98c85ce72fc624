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
