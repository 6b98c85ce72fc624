"""The `vlcheck` command (`main`; `python -m vlcheck.cli`) and the starter specs of `vlcheck init`
(`starter`)."""
