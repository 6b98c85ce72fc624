"""Bad and hostile inputs and what each family does with them (`inputs`; the cases themselves are
named in `vlcheck.spec.hostile_cases`), where typed placeholders land (`placement`), and the
guarded children that run them with a deadline and a memory allowance (`guard`).
"""
