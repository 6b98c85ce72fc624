"""`vlcheck env`: a virtual environment per (vllm, transformers, torch), made with uv, cached, reused.

uv (a dependency for this reason) resolves in a fraction of pip's time, keeps one wheel cache for
every environment and links wheels into a new one instead of unpacking them (hardlinks on one
filesystem), so an environment whose wheels are cached is made in seconds, and ten of them cost
about the disk of one (torch's CUDA libraries alone are several GB per environment with pip).

The environment is installed from the package index only: uv reads no pip configuration, and the
`UV_FIND_LINKS`/`PIP_*` variables are dropped for it, so a machine's local wheel folder (here a
torch 2.13.0+cpu build without torchvision's operators) never replaces the index's torch. vlcheck
itself is installed into it (editable, from this checkout, or the same release from the index),
so `vlcheck env ... -- check` runs this vlcheck against the named vLLM and transformers.
A torchaudio built for another torch than the resolved one (vLLM requires it; not every torch has
a matching build) is removed: nothing vlcheck runs needs it, and one that cannot load fails imports
that probe for it.

Environments live in `$VLCHECK_ENVS` (default `~/.cache/vlcheck/envs`), one folder per request,
its marker file written last, so an interrupted install is never reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

MARKER = "vlcheck-env.json"
"""Written last into a complete environment: what was asked, what was resolved, how long it took."""

DROPPED_VARIABLES = ("UV_FIND_LINKS", "PIP_FIND_LINKS", "PIP_CONFIG_FILE", "PIP_CONSTRAINT", "UV_CONSTRAINT",
                     "UV_OVERRIDE", "UV_EXCLUDE", "VIRTUAL_ENV")
"""Local wheel folders and constraints meant for other installs; an index mirror (UV_INDEX_URL,
UV_DEFAULT_INDEX) is kept."""

PACKAGES = ("vllm", "transformers", "torch", "torchvision", "torchaudio", "huggingface_hub", "tokenizers")


class EnvError(RuntimeError):
    """The environment could not be made; the message names the request and uv's last lines."""

    @property
    def no_solution(self) -> bool:
        """The versions cannot be installed together (a fact about them, worth remembering), as
        opposed to a tool or network failure here (worth retrying, never recorded)."""
        return any(sign in str(self) for sign in NO_SOLUTION_SIGNS)


NO_SOLUTION_SIGNS = ("No solution found when resolving", "requirements are unsatisfiable",
                     "because there is no version of", "has no wheels with a matching")


@dataclass(frozen=True)
class EnvRequest:
    vllm: str
    transformers: str | None = None
    """None: whatever the resolver picks for this vLLM when the environment is made (the newest)."""
    torch: str | None = None
    """None: the torch this vLLM pins."""

    @property
    def key(self) -> str:
        return "_".join(f"{name}-{version or 'resolved'}" for name, version in
                        (("vllm", self.vllm), ("transformers", self.transformers), ("torch", self.torch)))

    def requirements(self) -> list[str]:
        return [f"{name}=={version}" for name, version in
                (("vllm", self.vllm), ("transformers", self.transformers), ("torch", self.torch)) if version]

    def __str__(self) -> str:
        return ", ".join(self.requirements()) + ("" if self.torch else " (torch as vLLM pins it)")


@dataclass
class Env:
    path: Path
    request: EnvRequest
    versions: dict[str, str | None]
    created_s: float | None
    """Seconds it took to make; None when it was reused."""
    reused_s: float | None = None

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def envs_dir() -> Path:
    return Path(os.environ.get("VLCHECK_ENVS") or Path.home() / ".cache" / "vlcheck" / "envs")


def find_uv() -> str:
    try:
        from uv import find_uv_bin  # the uv package on PyPI ships the binary

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise EnvError("uv is not installed: `pip install uv` (vlcheck makes its environments with it)")


def _uv_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_VARIABLES}
    env.setdefault("UV_LINK_MODE", "hardlink")
    env["UV_NO_CONFIG"] = "1"
    return env


def vlcheck_source() -> list[str]:
    """How uv installs this vlcheck: editable from a checkout, else the same release from the index."""
    import vlcheck

    root = Path(vlcheck.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file():
        return ["-e", str(root)]
    return [f"vlcheck=={vlcheck.__version__}"]


def base_python() -> str:
    """The interpreter this vlcheck runs on, outside any virtual environment."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _run(cmd: list[str], request: EnvRequest, log: Callable[[str], None]) -> str:
    proc = subprocess.run(cmd, env=_uv_environment(), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        step = "uv venv" if cmd[1] == "venv" else f"uv pip {cmd[2]}"
        raise EnvError(f"{request}: {step} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout + proc.stderr


def _versions(python: Path) -> dict[str, str | None]:
    code = ("import json, importlib.metadata as m\nout = {}\nfor d in %r:\n    try: out[d] = m.version(d)\n"
            "    except m.PackageNotFoundError: out[d] = None\nprint(json.dumps(out))" % (PACKAGES,))
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)


def _file_clashes(python: Path) -> list[str]:
    """`core.file_clashes` in the environment: files two of its distributions both install."""
    code = "from vlcheck.core.file_clashes import file_clashes\nfor c in file_clashes(): print(c.line())"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def _matches_torch(versions: dict[str, str | None]) -> bool:
    """torchaudio X.Y is built against torch X.Y alone; vLLM pins torch but may pull an older
    torchaudio (vLLM 0.32: torchaudio 2.11 beside torch 2.13, for which none is published)."""
    audio, torch = versions.get("torchaudio"), versions.get("torch")
    return audio is None or torch is None or audio.split("+")[0].split(".")[:2] == torch.split("+")[0].split(".")[:2]


def read_marker(path: Path) -> dict | None:
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None


def ensure(request: EnvRequest, refresh: bool = False, log: Callable[[str], None] = print) -> Env:
    """The environment for `request`: reused when complete, else made (seconds with cached wheels)."""
    started = time.monotonic()
    path = envs_dir() / request.key
    marker = read_marker(path)
    source = vlcheck_source()
    if marker and not refresh and (path / "bin" / "python").exists():
        if marker.get("vlcheck_source") != source:  # another checkout made it: point it at this one
            _run([find_uv(), "pip", "install", "--python", str(path / "bin" / "python"), "--no-deps", *source],
                 request, log)
            marker["vlcheck_source"] = source
            (path / MARKER).write_text(json.dumps(marker, indent=1))
        return Env(path, request, marker["versions"], None, round(time.monotonic() - started, 2))
    uv = find_uv()
    shutil.rmtree(path, ignore_errors=True)  # no marker: an interrupted install, never reused
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"vlcheck env: making {request.key} with uv ({request})")
    try:
        _run([uv, "venv", "--quiet", "--python", base_python(), str(path)], request, log)
        python = path / "bin" / "python"
        install = [uv, "pip", "install", "--python", str(python), *request.requirements(), *source]
        try:  # from the cache alone first: no index round trips (11 s instead of 30 s on a loaded machine)
            _run([*install[:3], "--offline", *install[3:]], request, log)
        except EnvError:
            _run(install, request, log)
        versions = _versions(python)
        dropped = []
        if not _matches_torch(versions):
            _run([uv, "pip", "uninstall", "--python", str(python), "torchaudio"], request, log)
            dropped.append(f"torchaudio {versions['torchaudio']} (built for another torch than {versions['torch']})")
            versions["torchaudio"] = None
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    seconds = round(time.monotonic() - started, 1)
    marker = {"request": asdict(request), "versions": versions, "dropped": dropped, "created_s": seconds,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "vlcheck_source": source}
    (path / MARKER).write_text(json.dumps(marker, indent=1))
    log(f"vlcheck env: {request.key} made in {seconds:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + (f"; dropped {', '.join(dropped)}" if dropped else ""))
    for line in _file_clashes(python):
        log(f"vlcheck env: warning: {line}")
    return Env(path, request, versions, seconds)


def installed_envs() -> list[tuple[Path, dict]]:
    root = envs_dir()
    if not root.is_dir():
        return []
    return [(p, m) for p in sorted(root.iterdir()) if (m := read_marker(p)) is not None]


def run_vlcheck(env: Env, argv: Sequence[str], extra_env: dict[str, str] | None = None,
                **kwargs) -> subprocess.CompletedProcess:
    """`vlcheck ARGV` with the environment's interpreter (this checkout's code, its packages).

    The environment is vlcheck's cache, so Python writes its bytecode there whatever
    PYTHONDONTWRITEBYTECODE says: uv installs no .pyc, and without them every process compiles the
    modules it imports again (vLLM, torch, transformers: about 10 s of CPU per process; a candidate
    check took 226 s instead of 163 s, docs/performance.md). The first run's warm-up process, alone,
    writes most of it, before the check's workers start side by side."""
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")}
    cache = vllm_cache(env.versions.get("vllm") or env.request.vllm)
    environ["VLLM_CACHE_ROOT"] = str(cache)
    environ.update(extra_env or {})
    bytecode = env.path / "vlcheck-bytecode-written"
    if not (cache / "vlcheck-warmed").exists() or not bytecode.exists():
        subprocess.run([str(env.python), "-c", WARM], env=environ, capture_output=True)
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "vlcheck-warmed").write_text(env.path.name + "\n")
        bytecode.write_text("the first vlcheck run in this environment wrote the bytecode of what it imports\n")
    return subprocess.run([str(env.python), "-m", "vlcheck.cli", *argv], env=environ, **kwargs)


WARM = ("from vlcheck.adapter.models import warm_model_info_cache\n"
        "from vlcheck.spec.registry import all_families\n"
        "warm_model_info_cache(sorted({v.architecture for s in all_families().values() for v in s.variants}))")
"""One process that fills a cold release's model-info cache (instead of a vLLM subprocess per architecture)."""


def vllm_cache(vllm: str) -> Path:
    """vLLM's cache folder for one vLLM release. vLLM keeps one model-info file per architecture
    (`modelinfos/`, keyed inside by the model file's hash), so two releases sharing a folder overwrite
    each other's and every run re-inspects each architecture in a subprocess (about 380 s of CPU for
    the 60-odd families); one folder per release keeps each warm."""
    root = Path(os.environ.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "vllm")
    return root / "vlcheck-by-release" / f"vllm-{vllm}"


def request_from(args: argparse.Namespace) -> EnvRequest:
    return EnvRequest(args.vllm, args.transformers, args.torch)


def add_version_arguments(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--vllm", required=required, metavar="VERSION", help="the vLLM release, e.g. 0.28.0")
    p.add_argument("--transformers", metavar="VERSION", help="the transformers release (default: the newest that resolves)")
    p.add_argument("--torch", metavar="VERSION", help="the torch release (default: the one vLLM pins)")


NOT_MADE = 3
"""The environment could not be made for a reason that is not the versions' (uv missing, no network, a
full disk): nothing said about them; worth retrying (the matrix and bisect stop on it, the same code)."""
NO_SOLUTION = 9
"""The versions cannot be installed together (or one of them does not exist): a fact about them,
which the matrix records as an unmeasurable point."""
EXIT_CODES = [
    (0, "ok", "the environment is ready (its python printed), or listed, or removed"),
    (NOT_MADE, "not made", "the environment could not be made for a reason not the versions' (uv missing, no "
                           "network, a full disk): retry"),
    (NO_SOLUTION, "no solution", "the versions cannot be installed together, or one of them does not exist"),
]
"""`vlcheck env`'s own exit codes (2 bad input or usage and 1 a crash are every command's: `vlcheck.cli.main`);
with `-- COMMAND`, once the environment is ready, the exit code is that command's."""
EXIT_NOTE = "with `-- COMMAND`: once the environment is ready, that vlcheck command's own exit code"


def cmd_env(args: argparse.Namespace) -> int:
    if args.list:
        for path, marker in installed_envs():
            v = marker["versions"]
            print(f"{path.name}: vllm {v.get('vllm')}, transformers {v.get('transformers')}, torch {v.get('torch')} "
                  f"(made in {marker.get('created_s')} s on {marker.get('created')})")
        print(f"in {envs_dir()}")
        return 0
    if not args.vllm:
        print("vlcheck env: name a vLLM release (--vllm X), or --list", file=sys.stderr)
        return 2
    request = request_from(args)
    if args.remove:
        shutil.rmtree(envs_dir() / request.key, ignore_errors=True)
        print(f"removed {envs_dir() / request.key}")
        return 0
    try:
        env = ensure(request, refresh=args.refresh, log=lambda m: print(m, file=sys.stderr))
    except EnvError as err:
        print(f"vlcheck env: {err}", file=sys.stderr)
        return NO_SOLUTION if err.no_solution else NOT_MADE
    if env.created_s is None:
        print(f"vlcheck env: reused {env.path.name} ({env.reused_s} s)", file=sys.stderr)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print(env.python)
        return 0
    return run_vlcheck(env, command).returncode


def register(sub) -> None:
    p = sub.add_parser(
        "env", help="make (or reuse) a cached environment with the named vLLM, transformers and torch, "
                    "then run a vlcheck command in it",
        description="Examples:\n  vlcheck env --vllm 0.28.0 --transformers 5.16.1          # print its python\n"
                    "  vlcheck env --vllm 0.28.0 --transformers 5.17.0 -- check --json after.json\n"
                    "  vlcheck env --list",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_arguments(p, required=False)
    p.add_argument("--refresh", action="store_true", help="make it again even when cached")
    p.add_argument("--remove", action="store_true", help="delete this environment")
    p.add_argument("--list", action="store_true", help="the cached environments")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- a vlcheck command to run in it (check, diff, ...)")
    p.set_defaults(func=cmd_env)
