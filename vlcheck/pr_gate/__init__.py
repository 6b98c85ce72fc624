"""The gate where users decide: a pull request that bumps vLLM or transformers gets vlcheck's verdict
as one comment, updated in place, and a check that passes or fails on it (docs/pull-requests.md)."""
