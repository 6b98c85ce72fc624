"""vlcheck across vLLM x transformers versions: environments per version pair (`envs`), measured
points and their store (`points`), bisection (`bisect`), the compatibility matrix (`grid`: its axes
and cells; `matrix`: measuring it and `vlcheck matrix`; `compat_report`: its pages), the specs'
declarations widened to the measured versions (`declarations`) and the CPU build's source comparison
(`same_source`).
"""
