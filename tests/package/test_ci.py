"""CI's own choices stay in step with the code: every engine configuration of vLLM's CPU build is in
the CPU engine tier's selection of `.ci/run`, and each place a configuration is kept to exists."""

import re
import subprocess
from pathlib import Path

from vlcheck.configurations.registry import scoped, select
from vlcheck.spec.registry import family_and_config_names

ROOT = Path(__file__).resolve().parents[2]


def ci_configurations() -> list[str]:
    """The default of `CONFIGS` in .ci/run, as bash expands it (line continuations and all)."""
    text = (ROOT / ".ci" / "run").read_text()
    loop = re.search(r"(?:^ *\w+=\S+\n)*^ *for name in \$\{CONFIGS:-.*?\}; do", text, re.S | re.M)
    assert loop, ".ci/run no longer chooses the CPU engine tier's configurations in `for name in ${CONFIGS:-...}`"
    listed = subprocess.run(["bash", "-c", loop.group(0) + ' echo "$name"; done'], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin"})
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


def test_every_cpu_configuration_runs_in_ci_and_where_it_is_kept_exists():
    names = ci_configurations()
    chosen = {c.name for c in select(names, "cpu")}
    every = {c.name for c in select(["all"], "cpu") if not c.is_default}
    assert every <= chosen, f"not in .ci/run's CONFIGS: {sorted(every - chosen)}"
    places = {place for name in names for place in scoped(name)[1]}
    assert places and places <= family_and_config_names(), sorted(places - family_and_config_names())
