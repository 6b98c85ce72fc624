"""Checks that run real vLLM engines, on GPUs and on vLLM's CPU build alike: the engine cache
(`engines`), generation, stop and cache runs (`runs`), goldens (`goldens`), the OpenAI server
(`engine_server`), the example runner (`run_example`), the tensor-parallel comparison
(`tensor_parallel`) and the hang watchdog (`watchdog`).
"""
