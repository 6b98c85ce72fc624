"""The top layer, what users and CI run: the check catalogue (`checks`), the report, diff and merge of
check runs (`report`, `diff`, `merge`), sharding by measured durations (`shard`, with
`gpu_durations.json`), the pytest helpers the tests share (`testing`) and the `vlcheck` command (`cli`).
"""
