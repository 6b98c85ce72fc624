"""The lowest layer, with no vlcheck imports: check results and statuses (`results`), the installed
versions (`versions`), deterministic test media (`media`) and readable text differences (`textdiff`).
"""
