"""The pytest plugin's options (group "vlcheck" of `pytest --help`; docs/tests.md is generated from them)."""

from __future__ import annotations

import pytest

from vlcheck.configurations.registry import CONFIGURATIONS, DEFAULT
from vlcheck.engine.engines import WEIGHTS, WEIGHTS_HELP
from vlcheck.spec.registry import SPEC_PATH_ENV
from vlcheck.spec.schema import KINDS


def _shard(text: str):
    from vlcheck.runners.shard import Shard

    try:
        return Shard.parse(text)
    except ValueError as err:
        raise pytest.UsageError(f"--vlcheck-shard: {err}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlcheck", "vlcheck: conformance of vision-language models served by vLLM")
    group.addoption("--vlcheck-family", action="append", default=[], metavar="NAME",
                    help="only check these families (repeatable); default: all specs")
    group.addoption("--vlcheck-variant", choices=KINDS, default=None,
                    help="only this example of each family (the GPU runner uses one process per family-config)")
    group.addoption("--vlcheck-weights", choices=WEIGHTS, default="auto", help="GPU tier: " + WEIGHTS_HELP)
    group.addoption("--vlcheck-update-goldens", action="store_true",
                    help="engine tiers: record greedy goldens, and the noise they are compared within, instead "
                         "of comparing with them")
    group.addoption("--vlcheck-measure-noise", action="store_true",
                    help="engine tiers: measure this GPU's noise for the goldens as they are (each request alone, a "
                         "repeat, the golden against this run) and store it with them, on the versions they were "
                         "recorded on (vlcheck/engine/noise.py); their tolerance is 3 x that noise")
    group.addoption("--vlcheck-cache-off", action="store_true",
                    help="GPU tier: also check each family with the processor cache disabled (a second engine each)")
    group.addoption("--vlcheck-shard", type=_shard, default=None, metavar="I/N",
                    help="run shard I of N: whole families, balanced by measured durations (vlcheck/runners/shard.py); "
                         "tests that belong to no family run in shard 1")
    group.addoption("--vlcheck-shard-durations", default=None, metavar="FILE",
                    help="the seconds per family-config --vlcheck-shard balances by (default: the GPU tier's, "
                         "vlcheck/runners/gpu_durations.json; scripts/cpu-engine-tier passes the CPU engine tier's)")
    group.addoption("--vlcheck-shard-claims", default=None, metavar="DIR",
                    help="with --vlcheck-shard I/N: the N shard processes, started side by side with the same DIR "
                         "(empty at first), take whole families from one queue, longest first, as each becomes "
                         "free (vlcheck/runners/claims.py), instead of the fixed split")
    group.addoption("--vlcheck-store", metavar="DIR", default=None,
                    help="the result store the catalogue's checks share with `vlcheck check` (default: $VLCHECK_STORE "
                         "or ~/.cache/vlcheck/results; `none`: no store): a family-config whose inputs (vlcheck's code "
                         "of the check, the spec, the installed packages, the Hub files and seeds it reads) hash as "
                         "one measured before is taken from it, not measured again")
    group.addoption("--vlcheck-fresh", action="store_true",
                    help="measure every check again, ignoring the result store (what is measured is still stored)")
    group.addoption("--vlcheck-baseline", metavar="FILE", default=None,
                    help="compare with this report (`vlcheck check --json` on the versions you run today) instead of "
                         "the repo's snapshots, which are the pinned reference's: the catalogue's checks pass where "
                         "they behave as in it, by vlcheck diff's rules")
    group.addoption("--vlcheck-accepted", metavar="FILE", default=None,
                    help="with --vlcheck-baseline: a TOML file of reviewed, accepted changes (see vlcheck diff --accepted)")
    group.addoption("--vlcheck-serve", action="append", default=[], metavar="FAMILY",
                    help="engine tiers: also serve vLLM's OpenAI app for these families or family-configs "
                         "(repeatable: qwen2_vl, qwen2_vl-single, all) and check it over HTTP: against the offline "
                         "engine and with the official openai client (vlcheck/runners/tier/engine/test_engine_served.py, on GPUs and vLLM's "
                         "CPU build). The app runs on the family-config's own engine (vlcheck/engine/shared_server.py); "
                         "vlcheck tier gpu selects all")
    group.addoption("--vlcheck-engine-report", metavar="FILE",
                    help="engine tiers: write every engine test's cell (engine.NAME, cpu_engine.NAME) as a vlcheck report (the input of "
                         "`vlcheck diff`; per --vlcheck-shard, joined by `vlcheck merge`)")
    group.addoption("--vlcheck-config", action="append", default=[], metavar="NAME",
                    help="engine tiers: also run these engine configurations per family-config (repeatable): "
                         + ", ".join(c for c in CONFIGURATIONS if c != DEFAULT) + ", all, or serve:FLAGS (your "
                         "`vllm serve` flags, e.g. 'serve:--enable-prefix-caching --max-num-batched-tokens 512'); "
                         "NAME@WHERE runs it on those families or family-configs only (`lora@qwen2_vl-single,llava`; elsewhere "
                         "its cell skips saying so); each against the eager goldens, with proof that its path ran (tests/configurations/). "
                         "Served ones (load, video_file) run where --vlcheck-serve selects a server")
    group.addoption("--vlcheck-tp", type=int, default=None, metavar="N",
                    help="GPU tier: the configuration tpN (--vlcheck-config tpN): each family-config served at "
                         "tensor_parallel_size N on its TP-ready checkpoint against TP=1 (N GPUs per family-config)")
    group.addoption("--vlcheck-specs", action="append", default=[], metavar="DIR",
                    help=f"a folder of your own spec files (repeatable; also the ini option vlcheck_specs, and "
                         f"${SPEC_PATH_ENV}): their families are checked, and vlcheck's tier is collected unless "
                         "test paths are named")
    parser.addini("vlcheck_specs", type="paths", default=[],
                  help="folders of your own spec files, relative to this configuration file (as --vlcheck-specs)")


STARTED = pytest.StashKey[float]()
"""When the session started (time.time()): --vlcheck-shard-claims tells an earlier run's claims by it."""
