"""The parallel configurations held to TP=1 (`tp2`, `encoder_dp`, `tp4`, `encoder_dp4`, `pp2_tp2`): the
family-config's tensor-parallel-ready checkpoint (`engine.tensor_parallel`: 8 heads, seeded weights)
served over several GPUs, held to the same checkpoint at TP=1 by vLLM's `check_logprobs_close` rule (two
shardings reduce in another order: another implementation, not a repeat), and to the media-sensitivity test.

The sizes are the configuration's own engine args (`tensor_parallel_size`, `pipeline_parallel_size`):
one definition for every size. `encoder_dp*` keeps the language model sharded and runs the vision encoder
data-parallel (`mm_encoder_tp_mode="data"`), a path of its own in each model (`run_dp_sharded_*_vision_model`).
The proof is read from the running engine: one answer per worker, and the parallel sizes and encoder mode
in its config. The TP=1 reference engine runs beside the parallel one for the length of the check, once
per family-config for every parallel configuration of the process.
"""

from __future__ import annotations

from pathlib import Path

from vlcheck import adapter
from vlcheck.configurations import offline
from vlcheck.configurations.offline import generation, sees_media
from vlcheck.configurations.outcome import Measured
from vlcheck.configurations.registry import CONFIGURATIONS, Configuration
from vlcheck.engine import goldens
from vlcheck.engine import runs as g
from vlcheck.engine.tensor_parallel import plan
from vlcheck.spec.schema import FamilySpec, Variant


def tensor_parallel_size(config: Configuration) -> int:
    return int(config.engine_args.get("tensor_parallel_size", 1))


def pipeline_parallel_size(config: Configuration) -> int:
    return int(config.engine_args.get("pipeline_parallel_size", 1))


def layout(config: Configuration) -> str:
    """`TP=4`, `PP=2 x TP=2`: the reports' name for the engine held to TP=1."""
    pp = pipeline_parallel_size(config)
    return f"PP={pp} x TP={tensor_parallel_size(config)}" if pp > 1 else f"TP={tensor_parallel_size(config)}"


def applies(spec: FamilySpec, variant: Variant, config: Configuration | None = None) -> str | None:
    """Why the TP-ready checkpoint cannot be split over the configuration's tensor-parallel ranks (a head
    count that does not divide), why the model class cannot be split into pipeline stages, or, for an
    `encoder_dp` configuration, why vLLM would not run this model's encoder data-parallel; else None."""
    size = tensor_parallel_size(config) if config is not None else 2
    why = plan(spec, variant).why_not(size)
    if why is None and config is not None:
        why = offline.applies(spec, variant, config)
    if why is None and config is not None and wants_data_parallel_encoder(config):
        why = encoder_not_data_parallel(variant.architecture)
    return why


def wants_data_parallel_encoder(config: Configuration) -> bool:
    return config.engine_args.get("mm_encoder_tp_mode") == "data"


def encoder_not_data_parallel(architecture: str) -> str | None:
    """vLLM runs an encoder data-parallel only where the model class says it can
    (`supports_encoder_tp_data`); elsewhere it warns and shards the encoder by weights, and a TP engine
    started to learn that (70 s on an H100) proves nothing: say so before any engine starts."""
    try:
        model_cls = adapter.load_model_class(architecture)
    except Exception:  # noqa: BLE001 - no class to ask: the engine's start will say it
        return None
    if getattr(model_cls, "supports_encoder_tp_data", False):
        return None
    return (f"vLLM's {model_cls.__name__} has no data-parallel encoder (supports_encoder_tp_data is False): "
            "with mm_encoder_tp_mode=data vLLM shards its encoder by weights, as the tp configurations do")


def measure(spec: FamilySpec, variant: Variant, handle, config: Configuration) -> Measured:
    measured = Measured(reference="TP=1 on the same checkpoint")
    runs = generation(spec, variant, handle, measured)
    offline.parallel_proof(handle, config, measured)
    reference = tp1_outputs(spec, variant, handle)
    measured.facts["distance_to_tp1"] = {r.shape: goldens.largest_difference(reference[r.shape], r.outputs) for r in runs}
    measured.problems += [f"{r.shape}: {layout(config)} against TP=1: {p}" for r in runs
                          for p in goldens.logprobs_close(reference[r.shape], r.outputs)]
    sees_media(spec, variant, handle, measured)
    return measured


_TP1: dict[tuple, dict[str, list[dict]]] = {}
"""TP=1 outputs measured in this process: every parallel configuration shares one reference engine start."""


def tp1_outputs(spec: FamilySpec, variant: Variant, handle) -> dict[str, list[dict]]:
    """The example's requests on the same checkpoint, weights and dtype at TP=1, in an engine of its own."""
    from vlcheck.engine.engines import EngineCache

    key = (spec.name, variant.kind, handle.platform, handle.dtype, handle.model_dir)
    if key not in _TP1:
        cache = EngineCache()
        try:
            tp1 = cache.get(spec, variant, "seeded", handle.platform, checkpoint="tp_ready", dtype=handle.dtype)
            _TP1[key] = {r.shape: r.outputs for r in g.generation_runs(spec, variant, tp1)}
        finally:
            cache.close()
    return _TP1[key]


HELD_TO_TP1 = tuple(c.name for c in CONFIGURATIONS.values() if c.checkpoint == "tp_ready")
"""The configurations measured here: served on the TP-ready checkpoint and held to it at TP=1."""


def results_table(evidence: Path) -> str:
    """The GPU tier's parallel configurations as a Markdown table, from its JUnit XMLs (a logs folder or
    the logs.tgz that `vlcheck tier gpu` leaves): one row per family-config and configuration."""
    import tarfile

    from vlcheck.core import junit

    if evidence.is_dir():
        documents = [f.read_bytes() for f in sorted(evidence.rglob("*.xml"))]
    else:
        with tarfile.open(evidence) as tar:
            documents = [tar.extractfile(m).read() for m in sorted(tar.getmembers(), key=lambda m: m.name)
                         if m.name.endswith(".xml")]
    rows = ["| family-config | configuration | against TP=1 | proof | reason |", "|---|---|---|---|---|"]
    labels = {"failed": "DIFFER", "error": "error", "skipped": "skip", "xfailed": "declared (xfail)"}
    for document in documents:
        for case in junit.cases(document):
            if not case.name.startswith("test_configuration["):
                continue
            test_id, _, configuration = case.name.split("[", 1)[1].rstrip("]").rpartition("-")
            if configuration not in HELD_TO_TP1:
                continue
            family_config = test_id.split("-", 1)[1] if test_id.startswith(("gpu-", "cpu-")) else test_id
            outcome = labels.get(case.outcome, "agree")
            if outcome == "DIFFER" and "against TP=1" not in case.message + case.detail:
                outcome = "not compared"  # the engines did not get there: a timeout, a crash
            reason = case.message[:200].replace("|", "/").replace("\n", " ") if case.outcome != "passed" else ""
            rows.append(f"| {family_config} | {configuration} | {outcome} | {case.properties.get('proof', '-')} | {reason} |")
    return "\n".join(rows)
