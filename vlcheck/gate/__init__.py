"""The top layer, what users and CI run: the check catalogue (`checks`), the report, diff and merge of
check runs (`report`, `diff`, `merge`), sharding by measured durations (`shard`, with
`gpu_durations.json`), the pytest helpers the tests share (`testing`), the pytest plugin
(`pytest_plugin`: options, fixtures, hooks) and the tier it ships for any spec (`tier/`), starter
specs for a user's own model (`starter`) and the `vlcheck` command (`cli`).
"""
