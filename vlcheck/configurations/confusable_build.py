"""`confusable_build`: the family's second synthetic build (`[synthetic.confusable]`: config fields that
default to one value made to differ, e.g. Qwen-VL's `temporal_patch_size` 3 against `merge_size` 2)
with seeded weights, served by the engine. The CPU check `confusable` runs the processor, tiling and
placement checks on that build; vLLM's model code reads the same fields where those checks cannot see
(the vision tower's patch embedding, the merger, the M-RoPE positions of each image and video), and
code that reads one for the other answers plausibly on every checkpoint where both are 2.

Held, per request of the transformers reference (`numerics.reference.requests`, one per modality), to
transformers on the same build and weights, computed here on CPU by the rule vLLM against transformers
is held to (vLLM's `check_logprobs_close`, and in float32 the first-step tolerance); the engine's prompt
token counts to vLLM's processor on that build; and to the media-sensitivity test. Declarations of the
default build do not carry over (its `vllm_reference` deviation was measured there): only the
variant's `deviations.confusable_build` covers this cell's findings.

Proof: the fields the build overrides, read from the model config of the engine that answered.
"""

from __future__ import annotations

from functools import reduce

from vlcheck.configurations.offline import generation, sees_media
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import Configuration
from vlcheck.numerics import reference
from vlcheck.spec.schema import FamilySpec, Variant, confusable_spec, why_no_second_build


def applies(spec: FamilySpec, variant: Variant, config: Configuration | None = None) -> str | None:
    return why_no_second_build(spec, variant)


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    if handle.weights != "seeded":
        return Measured(not_exercised=f"the build is held to transformers on its seeded weights; this engine has "
                                      f"{handle.weights} weights")
    built, plain = confusable_spec(spec, variant)
    measured = Measured(reference="transformers on the same build and weights")
    build_proof(spec, handle, measured)
    generation(built, plain, handle, measured)
    against_transformers(built, plain, handle, measured)
    sees_media(built, plain, handle, measured)
    return measured


def build_proof(spec: FamilySpec, handle, measured: Measured) -> None:
    """The overridden config fields as the engine that answered read them: a value that is not the
    build's means another checkpoint answered."""
    hf_config = handle.llm.llm_engine.vllm_config.model_config.hf_config
    wanted = spec.synthetic.confusable.config
    read = {path: _dotted(hf_config, path) for path in wanted}
    measured.proof = {"build": spec.synthetic.confusable.reason, "engine_config": read}
    measured.problems += [f"the engine's model config has {path} = {got!r}, not the build's {wanted[path]!r}: "
                          "another checkpoint answered" for path, got in read.items() if got != wanted[path]]


def _dotted(config, path: str):
    def step(node, key):
        return node.get(key) if isinstance(node, dict) else getattr(node, key, None)

    return reduce(step, path.split("."), config)


def against_transformers(spec: FamilySpec, variant: Variant, handle, measured: Measured) -> None:
    ref = reference.Reference(handle.model_dir, spec, variant)
    compared = {}
    for r in reference.requests(spec, variant):
        want = {**ref.run(r).as_output(), "shape": r.shape}
        got = {**reference.vllm_first_step(handle.llm, r), "shape": r.shape}
        found = [f"{r.shape}: against transformers on the same build: {p}"
                 for p in reference.disagreement(want, got, handle.dtype)]
        compared[r.shape] = found or "match"
        measured.problems += found
    measured.facts["against_transformers"] = compared
