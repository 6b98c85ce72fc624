"""`confusable`: the CPU checks that read a checkpoint's config (processor, tiling, placement, video
loaders) again on the family's second build, where fields that default to the same value differ.

Qwen-VL's synthetic config had `merge_size` and `temporal_patch_size` both 2 (their defaults), so code
that reads one for the other passed every check. The spec's `[synthetic.confusable]` table names the
overrides that tell them apart (`spec.schema.Confusable`); each check runs unchanged on a spec whose
recipe is that build, so one definition per check serves both builds. Declarations of the default build
do not carry over: the build is checked plainly, and only `deviations.confusable` covers its findings.
"""

from __future__ import annotations

from vlcheck.core.results import CheckResult, Status, declared_deviation
from vlcheck.spec.schema import FamilySpec, Variant, confusable_spec, why_no_second_build

CHECK = "confusable"


def confusable_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """Fact `<variant>.confusable`: per check, its status and reason on the confusable build, then its
    facts' lines; fails where a check fails on that build, an error where one could not run."""
    # imported here, by name, so that the result store's key follows their code (`cell_inputs.code_digest`)
    from vlcheck.cpu.processor_check import processor_check
    from vlcheck.cpu.tiling import tiling_check
    from vlcheck.cpu.video_loaders import video_loaders_check
    from vlcheck.hostile.placement import placement_check

    # the catalogue's checks that read the checkpoint's config and processor files, in report order
    on_the_build = {"processor": processor_check, "tiling": tiling_check, "placement": placement_check,
                    "video_loaders": video_loaders_check}
    where = f"[{variant.kind}]"
    why = why_no_second_build(spec, variant)
    if why:
        return CheckResult(spec.name, CHECK, Status.SKIP, f"{where} {why}")
    built, plain = confusable_spec(spec, variant)
    lines, problems, errors, frames = [f"build: {spec.synthetic.confusable.reason}"], [], [], []
    ran = 0
    for name, check in on_the_build.items():
        result = check(built, plain)
        lines.append(f"{name}: {result.status.value}: {_reason(result, variant)}")
        lines += [f"  {line}" for line in _facts(result, variant)]
        # a deviation left on the plain variant is declared by what it names elsewhere (video_loaders' known
        # decoder defects: a loader and container), not by the default build: it holds on this build too
        if result.status in (Status.FAIL, Status.ERROR):
            (errors if result.status is Status.ERROR else problems).extend(
                f"{name}: {p}" for p in (result.details or [result.reason]))
            frames = frames or result.frames
        ran += result.status is not Status.SKIP
    data = {f"{variant.kind}.{CHECK}": lines}
    if errors:  # vlcheck could not run a check on the build: no verdict on vLLM
        return CheckResult(spec.name, CHECK, Status.ERROR, f"{where} on the confusable build: {errors[0]}",
                           errors + problems, data, frames=frames)
    if problems:
        failed = CheckResult(spec.name, CHECK, Status.FAIL, f"{where} on the confusable build: {problems[0]}", problems,
                             data, frames=frames)
        return declared_deviation(failed, variant)
    if not ran:
        return CheckResult(spec.name, CHECK, Status.SKIP, f"{where} no check could run on the confusable build", data=data)
    return declared_deviation(CheckResult(spec.name, CHECK, Status.PASS,
                                          f"{where} {ran} check(s) on the confusable build as on a checkpoint of its own",
                                          data=data), variant)


def _reason(result: CheckResult, variant: Variant) -> str:
    return result.reason.removeprefix(f"[{variant.kind}]").strip()


def _facts(result: CheckResult, variant: Variant) -> list[str]:
    """The check's facts of this variant as lines (a list of lines as it is, anything else as `key: value`)."""
    out = []
    for key, value in result.data.items():
        if not key.startswith(f"{variant.kind}."):
            continue
        fact = key.split(".", 1)[1]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out += [f"{fact}: {v}" for v in value]
        else:
            out.append(f"{fact}: {value}")
    return out
