"""vLLM's example scripts, executed with vLLM and transformers stubbed out (`seeds`), and compared with
the family specs (`seed_check`).
"""
