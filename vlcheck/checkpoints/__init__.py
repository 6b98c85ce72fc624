"""Tiny synthetic checkpoints built from a spec's `[synthetic]` recipe (`synthetic`), and their
fixed-seed weights (`seeded`), so that processors and engines run without the real weights.
"""
