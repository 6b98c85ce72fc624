"""vlcheck: conformance and regression tests for vision-language models served by vLLM.

The package is layered, lowest first (`LAYERS`); a module imports only its own layer and lower
ones, and only `adapter` reaches into vLLM's and transformers' internals (both rules are tested by
tests/package/test_layers.py): `core` (results, versions, media, text diffs), `spec` (the family
spec schema, the loader of the family spec files, `families/*.toml`, the names a spec may use), `adapter` (every
call into vLLM's and transformers' internals), `prompt` (rendering, chat templates, Hub assets,
template and stop conformance, prompt snapshots), `examples` (vLLM's example scripts executed and
compared with the specs), `checkpoints` (tiny synthetic checkpoints and their seeded weights),
`cpu` (engine-arg, architecture and processor checks without an engine), `served` (vLLM's
OpenAI-compatible servers started for real and driven over HTTP), `engine` (live vLLM
engines on GPUs and on the CPU build: the engine cache, generation runs, goldens, the engine server,
the example runner, tensor parallelism), `numerics` (the transformers
reference and processor fingerprints), `configurations` (the engine configurations users deploy:
chunked prefill, prefix caching, a processor cache under load, long prompts, video files), `hostile` (bad and hostile inputs, run in guarded children),
`speed` (vLLM's preprocessing timed per family-config, two environments A/B, the noise rule),
`gate` (the check catalogue, report, diff and its causes), `versions` (environments per version
pair, measured points, bisect, the compatibility matrix, declaration widening), `runners` (the pytest
plugin and its shipped tier, pytest helpers, sharding, merge, the engine tier), `pr_gate` (the
pull-request workflow's templates, pins and comment) and `cli` (the `vlcheck` command, starter specs).
"""

from importlib import metadata
from pathlib import Path

LAYERS: tuple[str, ...] = ("core", "spec", "adapter", "prompt", "examples", "checkpoints", "cpu", "served",
                           "engine", "numerics", "configurations", "hostile", "speed", "gate", "versions", "runners", "pr_gate", "cli")
"""The subpackages, lowest first: each may import its own layer and earlier ones, never a later one."""


def _version() -> str:
    try:
        return metadata.version("vlcheck")
    except metadata.PackageNotFoundError:  # a checkout on PYTHONPATH, not installed: its pyproject says
        import tomllib

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()
