"""Checks of a family against the installed vLLM on CPU: engine args and architecture."""

from __future__ import annotations

import types
import typing
from typing import Any

from vlcheck import adapter
from vlcheck.core.results import CheckResult, Status, declared_deviation, raised_by
from vlcheck.spec.migrations import migration_hint
from vlcheck.spec.schema import FamilySpec, Variant


def value_fits(value: Any, tp: Any) -> bool:
    """Whether a TOML value can be passed for an EngineArgs field of type `tp` (a loose check:
    config-object fields accept a dict, numeric fields accept ints)."""
    if tp is Any or tp is typing.Any or tp is object:
        return True
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(value_fits(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if value is None:
        return tp is type(None)
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        return isinstance(value, list) and (not args or all(any(value_fits(v, a) for a in args) for v in value))
    if origin is dict or tp is dict:
        return isinstance(value, dict) and (len(args) < 2 or all(value_fits(v, args[1]) for v in value.values()))
    if origin is type:
        return isinstance(value, str)  # a class given by its import path
    if origin is not None:  # Callable and other generics: accept what vLLM would try
        return True
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if isinstance(tp, type):
        return isinstance(value, (tp, dict))  # config dataclasses are built from dicts
    return True


def outside_allowed(value: Any, allowed: adapter.AllowedValues | None) -> list[Any]:
    """The value (each item, for a list) that is not one of the allowed values; none where the
    field has no declared values or the value is None (left to `value_fits`)."""
    if allowed is None or value is None:
        return []
    return [v for v in (value if isinstance(value, list) else [value]) if not allowed.allows(v)]


def not_allowed_message(key: str, value: Any, outside: list[Any], allowed: adapter.AllowedValues) -> str:
    shown = ", ".join(repr(v) for v in allowed.values)
    which = "" if outside == [value] else f": {', '.join(repr(v) for v in outside)}"
    return f"engine arg {key}={value!r}{which} is not one of vllm {adapter.version()}'s allowed values: {shown}"


def engine_args_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """Every engine arg of the variant (all modalities, largest item count) is a field of the
    installed vLLM's EngineArgs, its value is one of the values vLLM allows the field where vLLM
    declares them (`adapter.engine_arg_values`), and it fits the field's type."""
    fields = adapter.engine_arg_types()
    allowed = adapter.engine_arg_values()
    problems = []
    for modality in variant.modalities:
        args = variant.engine_args_for(modality, variant.most_items)
        for key, value in args.items():
            if key not in fields:
                hint = migration_hint(key)
                problems.append(f"engine arg {key!r} is not an EngineArgs field of vllm {adapter.version()}"
                                + (f"; migrate to {hint}" if hint else ""))
            elif outside := outside_allowed(value, allowed.get(key)):
                problems.append(not_allowed_message(key, value, outside, allowed[key]))
            elif not value_fits(value, fields[key]) and not (key in allowed and allowed[key].any_case):
                # (an enum's member named by a string, as vLLM takes it, does not fit the enum type)
                problems.append(f"engine arg {key}={value!r} does not fit its type {fields[key]}")
    if variant.sampling:
        from vllm import SamplingParams

        try:
            SamplingParams(**variant.sampling)
        except Exception as err:  # noqa: BLE001 - vLLM refusing the sampling fails; vlcheck's crash is an error
            if raised_by(err) == "vlcheck":
                raise
            problems.append(f"sampling {variant.sampling!r}: {type(err).__name__}: {err}")
    problems = list(dict.fromkeys(problems))  # modalities share most args
    where = f"[{variant.kind}]"
    if problems:
        return declared_deviation(CheckResult(spec.name, "engine_args", Status.FAIL, f"{where} {spec.name}: {problems[0]}",
                                              problems), variant)
    checked = {key for m in variant.modalities for key in variant.engine_args_for(m, variant.most_items)}
    return CheckResult(spec.name, "engine_args", Status.PASS, f"{where} {len(checked)} args fit")


def architecture_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """The variant's architecture is registered in vLLM as multimodal, its class imports, and it
    takes every modality the example sends."""
    arch, where = variant.architecture, f"[{variant.kind}]"

    def result(problem: str) -> CheckResult:
        return declared_deviation(CheckResult(spec.name, "architecture", Status.FAIL, f"{where} {spec.name}: {problem}",
                                              [problem]), variant)

    if arch not in adapter.supported_architectures():
        return result(f"{arch} is not a supported architecture of vllm {adapter.version()}")
    try:
        model_cls = adapter.load_model_class(arch)
    except ImportError as err:  # the class imports modules of vLLM and transformers: a failure here is theirs
        return result(f"the model class of {arch} does not import: {type(err).__name__}: {err}")
    except Exception as err:  # noqa: BLE001 - a model class that vLLM cannot import fails; vlcheck's crash is an error
        if raised_by(err) == "vlcheck":
            raise
        return result(f"the model class of {arch} does not import: {type(err).__name__}: {err}")
    if not adapter.is_multimodal_class(model_cls):
        return result(f"{arch} is not a multimodal model in vllm {adapter.version()}")
    taken = {m: adapter.takes_modality(model_cls, m) for m in variant.modalities}
    missing = [m for m, (ok, _) in taken.items() if not ok]
    if missing:
        return result(f"{arch} does not take {', '.join(missing)} in vllm {adapter.version()}")
    return CheckResult(spec.name, "architecture", Status.PASS, f"{where} {arch} imports; takes {', '.join(variant.modalities)}",
                       data={f"{variant.kind}.chat_placeholders": {m: p for m, (_, p) in taken.items()}})
