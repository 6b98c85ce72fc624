"""Speed as a finding: vLLM's preprocessing per family-config, timed in each environment of an
upgrade on one machine, interleaved, and judged by a noise-aware rule (`rule.py`).

`measure.py` times one family-config in the running Python; `worker.py` keeps one process per
environment alive so rounds alternate without re-importing vLLM; `ab.py` interleaves the two (the
machine each measured on: `core.devices.machine`); `page.py` draws the ratios.
"""
