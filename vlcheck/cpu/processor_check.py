"""vLLM's own multimodal processor, run on CPU over each family's rendered prompts."""

from __future__ import annotations

import re

from vlcheck import adapter
from vlcheck.checkpoints.folders import model_files
from vlcheck.checkpoints.synthetic import NotBuildable
from vlcheck.core.results import CheckResult, Status, crashed, declared_deviation, frames_of, raised_by
from vlcheck.prompt.conformance import template_unavailable
from vlcheck.prompt.render import default_questions
from vlcheck.prompt.requests import example_prompt, media_data
from vlcheck.prompt.templates import TemplateUnavailable
from vlcheck.spec.schema import FamilySpec, Variant


def explain(err: Exception, spec: FamilySpec, modality: str, count: int) -> str:
    """vLLM's processor errors, restated with the family and the item that went wrong."""
    text = f"{type(err).__name__}: {err}"
    m = re.search(r"Expected there to be (\d+) prompt placeholders corresponding to (\d+) (\w+) items, "
                  r"but instead found (\d+)", str(err))
    if m:
        want, found = int(m.group(1)), int(m.group(4))
        which = f"{m.group(3)} item {found}" if found < want else f"{found - want} surplus placeholder(s)"
        return (f"{spec.name}: {which}: the prompt has {found} placeholder(s) for {count} {modality} item(s) "
                f"({text.splitlines()[0][:160]})")
    # vllm 0.32 names the first item it could not place instead: items before it were placed
    m = re.search(r"Failed to apply prompt replacement for mm_items\['(\w+)'\]\[(\d+)\]", str(err))
    if m:
        found = int(m.group(2))
        return (f"{spec.name}: {m.group(1)} item {found}: the prompt has {found} placeholder(s) for {count} {modality} "
                f"item(s) ({text.splitlines()[0][:160]})")
    return f"{spec.name}: {modality} x{count}: {text.splitlines()[0][:300]}"


def processor_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """For 1..limit items of each modality: as many placeholder ranges as items; the token count
    of every item is recorded (and snapshotted)."""
    where = f"[{variant.kind}]"
    try:  # a model folder's own config, tokenizer and processor files; else the synthetic checkpoint
        local = model_files(spec, variant)
    except NotBuildable as err:
        return CheckResult(spec.name, "processor", Status.SKIP, f"{where} no checkpoint: {err}")
    except Exception as err:  # noqa: BLE001 - the builder is vlcheck's: whatever it raises is an error, never a fail
        return crashed(spec.name, "processor", err, f"{where} {spec.name}: building the synthetic checkpoint failed:")
    problems, counts, frames = [], {}, []  # frames: where the first exception behind a problem was raised
    top = variant.most_items
    for modality in variant.modalities:
        try:
            processor = adapter.create_processor(str(local), variant.engine_args_for(modality, top))
        except ImportError as err:  # an optional package the model's processor needs
            return CheckResult(spec.name, "processor", Status.SKIP,
                               f"{where} vLLM's processor for {spec.name} needs a package that is not installed: {err}")
        except Exception as err:  # noqa: BLE001 - vLLM refusing fails the check; vlcheck's own crash is an error
            if raised_by(err) == "vlcheck":
                return crashed(spec.name, "processor", err, where)
            problems.append(f"{spec.name}: vLLM could not build its processor: {type(err).__name__}: {str(err)[:300]}")
            frames = frames or frames_of(err)
            continue
        for count in variant.item_counts():
            try:
                prompt = example_prompt(spec, variant, modality, default_questions(variant, modality, count)[0], count)
            except TemplateUnavailable as err:
                return template_unavailable(spec, "processor", variant, err)
            try:
                out = adapter.apply_processor(processor, prompt, {modality: media_data(variant, modality, count)})
            except Exception as err:  # noqa: BLE001 - as above
                if raised_by(err) == "vlcheck":
                    return crashed(spec.name, "processor", err, where)
                problems.append(explain(err, spec, modality, count))
                frames = frames or frames_of(err)
                continue
            ranges = out["placeholders"].get(modality, [])
            if len(ranges) != count:
                problems.append(f"{spec.name}: {modality} x{count}: {len(ranges)} placeholder range(s) for {count} item(s)")
            counts[f"{modality} x{count}"] = {"prompt_tokens": len(out["prompt_token_ids"]),
                                               "item_tokens": [length for _, length in ranges]}
    data = {f"{variant.kind}.token_counts": counts} if counts else {}
    if problems:
        return declared_deviation(CheckResult(spec.name, "processor", Status.FAIL, f"{where} {problems[0]}", problems, data,
                                              frames=frames), variant)
    return CheckResult(spec.name, "processor", Status.PASS, f"{where} {len(counts)} request shape(s) processed", data=data)
