"""Checks that run real vLLM engines: the engine cache (`engines`), generation, cache and golden
checks (`gpu_checks`, `goldens`), the example runner (`run_example`) and the tensor-parallel
comparison (`tensor_parallel`).
"""
