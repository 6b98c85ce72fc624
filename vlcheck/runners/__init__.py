"""What runs the checks under pytest: the pytest plugin (`pytest_plugin`: options, fixtures, hooks)
and the tier it ships for any spec (`tier/`), the pytest helpers the tests share (`testing`), sharding
by measured durations (`shard`, with `gpu_durations.json`), the merge of shard reports (`merge`) and
the CPU engine tier's table and report (`engine_tier`).
"""
