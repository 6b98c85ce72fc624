"""Processor fingerprints: the tensors vLLM's multimodal processor hands the model (pixel values,
grids, masks, ...) for each family-config and request shape, one line per tensor: shape, dtype and
rounded summary statistics. A preprocessing change (resize, normalisation, patch order: image
processors change between transformers releases) shows as a one-line snapshot diff naming the
tensor, where the token counts of the processor check stay the same.
"""

from __future__ import annotations

from vlcheck.core.results import CheckResult, Status, frames_of, from_exception, message_head, raised_by
from vlcheck.prompt.render import default_questions
from vlcheck.prompt.requests import example_prompt, media_data
from vlcheck.spec.schema import FamilySpec, Variant

SIGNIFICANT = 5
"""Digits kept of each statistic: enough to show a changed normalisation or resize, few enough that
float32 summation order on another CPU does not move them."""


def shapes(variant: Variant) -> list[tuple[str, int]]:
    """(modality, item count) of each request: one item, and the most a multi-image example sends."""
    counts = sorted({1, variant.most_items})
    return [(m, c) for m in variant.modalities for c in counts]


def _number(x: float) -> str:
    return f"{x:.{SIGNIFICANT}g}"


def describe(tensor) -> str:
    """`shape dtype` and, for numbers, mean/std/min/max (and the sum of integers, e.g. grids)."""
    import torch

    if not isinstance(tensor, torch.Tensor):
        return f"{type(tensor).__name__} {tensor!r}"[:200]
    text = f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"
    if tensor.numel() == 0:
        return text
    if tensor.is_floating_point():
        t = tensor.double()
        std = _number(float(t.std())) if t.numel() > 1 else "-"
        return (f"{text} mean {_number(float(t.mean()))} std {std} min {_number(float(t.min()))} "
                f"max {_number(float(t.max()))}")
    if tensor.dtype == torch.bool:
        return f"{text} true {int(tensor.sum())}"
    return f"{text} sum {int(tensor.sum())} min {int(tensor.min())} max {int(tensor.max())}" + (
        f" values {tensor.flatten().tolist()}" if tensor.numel() <= 8 else "")


def fingerprint_lines(spec: FamilySpec, variant: Variant, processor) -> tuple[list[str], list[tuple[str, BaseException]]]:
    """One line per tensor of every request shape (`image x1 [0] pixel_values: (256, 1176) float32 ...`,
    or `audio x2: vllm raised ...` for a shape vLLM's processor refused), and the refusals (line, error):
    one refused count leaves the others' fingerprints standing."""
    from vlcheck.adapter import numerics

    lines, refused = [], []
    for modality, count in shapes(variant):
        prompt = example_prompt(spec, variant, modality, default_questions(variant, modality)[0], count)
        try:
            out = numerics.processor_outputs(processor, prompt, {modality: media_data(variant, modality, count)})
        except Exception as err:  # noqa: BLE001 - vLLM refusing a shape is a finding; vlcheck's crash is not
            if raised_by(err) == "vlcheck":
                raise
            refused.append((f"{modality} x{count}: {raised_by(err)} raised {type(err).__name__}: {message_head(err)}", err))
            lines.append(refused[-1][0])
            continue
        lines.append(f"{modality} x{count}: {len(out['prompt_token_ids'])} prompt tokens")
        for (m, index, key), value in sorted(out["tensors"].items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
            lines += [f"  {m}[{index}] {name}: {describe(tensor)}" for name, tensor in _named(key, value)]
    return lines, refused


def _named(key: str, value) -> list[tuple[str, object]]:
    """A list of tensors (MiniCPM-V's per-slice / per-frame pixel values) as one entry per tensor,
    `pixel_values[0]`, ...: a tensor's repr would spread over many lines."""
    import torch

    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [(f"{key}[{i}]", v) for i, v in enumerate(value)]
    return [(key, value)]


def fingerprints_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """The catalogue's `fingerprints` check: the tensors of every request shape as fact
    `<variant>.fingerprints` (the lines of `vlcheck/snapshots/test_fingerprints/`). It passes when vLLM's
    processor produced them; what they are is compared by `vlcheck diff` and the snapshots."""
    from vlcheck import adapter
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.checkpoints.synthetic import NotBuildable
    from vlcheck.engine.engines import variant_engine_args
    from vlcheck.prompt.conformance import template_unavailable
    from vlcheck.prompt.templates import TemplateUnavailable

    where = f"[{variant.kind}]"
    try:
        local = model_files(spec, variant)
    except NotBuildable as err:
        return CheckResult(spec.name, "fingerprints", Status.SKIP, f"{where} no checkpoint: {err}")
    try:
        # float32: the values as the processor computes them (an engine casts them to its dtype after)
        processor = adapter.create_processor(str(local), {**variant_engine_args(variant), "dtype": "float32"})
        lines, refused = fingerprint_lines(spec, variant, processor)
    except ImportError as err:
        return CheckResult(spec.name, "fingerprints", Status.SKIP,
                           f"{where} {spec.name}: its processor needs a package that is not installed: {err}")
    except TemplateUnavailable as err:
        return template_unavailable(spec, "fingerprints", variant, err)
    except Exception as err:  # noqa: BLE001 - vLLM rejecting the request fails; vlcheck's crash is an error
        return from_exception(spec.name, "fingerprints", err, where)
    data = {f"{variant.kind}.fingerprints": lines}
    if refused:
        problems = [line for line, _ in refused]
        return CheckResult(spec.name, "fingerprints", Status.FAIL, f"{where} {problems[0]}", details=problems, data=data,
                           frames=frames_of(refused[0][1]))
    tensors = sum(line.startswith("  ") for line in lines)
    return CheckResult(spec.name, "fingerprints", Status.PASS, f"{where} {tensors} tensor(s) fingerprinted", data=data)
