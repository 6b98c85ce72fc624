"""Checks of one family against the installed vLLM without an engine: engine args and architecture
(`vllm_checks`) and the multimodal processor on a synthetic checkpoint (`processor_check`).
"""
