"""What a family is: the spec schema (`schema`: every field documented at its definition), the loader
and validator of the `vlcheck/families/*.toml` files (`registry`), and the names a spec may use:
checks (`schema.CHECKS`), hostile-input cases (`hostile_cases`), renamed engine args (`migrations`);
where a spec's model lives, a Hub id or a local folder, and its config.json (`models`).
Adding a family is adding one TOML file to vlcheck/families/; no code here changes for it.
"""
