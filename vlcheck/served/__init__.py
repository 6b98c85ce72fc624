"""The served path: vLLM's OpenAI-compatible servers started for real on loopback, with a
family's engine args written as the `vllm serve` flags a user types, driven over HTTP."""
