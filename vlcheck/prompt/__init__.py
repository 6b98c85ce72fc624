"""From a spec to the text vLLM receives: rendering prompts (`render`), chat templates (`templates`),
the Hub files they come from (`assets`), the requests of an example (`requests`), template and stop
conformance against the model's own files (`conformance`), and the prompt snapshot documents and
their storage (`snapshots`).
"""
