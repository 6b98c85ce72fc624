"""The engine tests: on GPUs (`pytest -m gpu`, `vlcheck tier gpu`) and on vLLM's CPU build
(`pytest -m cpu_engine`, `vlcheck tier cpu-engine`), shipped so an installed vlcheck runs them."""
