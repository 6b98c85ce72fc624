"""Numerical conformance: the transformers reference on CPU that vLLM's outputs are compared with
(`reference`), and fingerprints of what vLLM's processor hands the model (`fingerprint`).
"""
