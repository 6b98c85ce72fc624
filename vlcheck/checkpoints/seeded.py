"""Seeded weights for synthetic checkpoints: fixed-seed, scaled so that outputs depend on the input,
saved under the tensor names of the real Hub checkpoints, so that vLLM's loader and transformers'
both take every tensor.

vLLM's dummy loading fills every weight with the same small noise: the output cannot see the
image. transformers' own initialisation (normal, std 0.02) at width 64 gives nearly flat
next-token distributions (top-5 logprobs within 0.1 nats), which no tolerance can compare. Here
every matrix is drawn with std `gain / sqrt(fan_in)` (activations keep their scale through the
layers) and the output head with a larger gain, so that logits spread over several nats.

Each tensor is drawn from its own generator, seeded by its Hub name: the values do not depend
on the order in which a transformers release builds its modules, only on the checkpoint layout.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from pathlib import Path

SEED = 0
HEAD_GAIN = 4.0
"""The output head's std multiplier: logits of std ~4 nats give top-5 gaps of about a nat. A model
whose head is its input embedding (tied: no head tensor saved) gets it on the embedding."""
HEAD_SUFFIXES = ("lm_head.weight", "output.weight")
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "wte.weight")
WEIGHTS_FILE = "model.safetensors"
INIT_HASH = hashlib.sha256(Path(__file__).read_bytes()
                           + (Path(__file__).parents[1] / "adapter" / "numerics.py").read_bytes()).hexdigest()[:12]
"""Part of a seeded checkpoint's content hash: changing the initialisation or the Hub-layout
conversion (`adapter/numerics.py`) rebuilds it."""


def draw(name: str, like, seed: int = SEED, head_suffixes: tuple[str, ...] = HEAD_SUFFIXES):
    """A seeded replacement for one checkpoint tensor (non-float tensors and constant vectors,
    such as norm weights and zero biases, are kept)."""
    import torch

    if not like.is_floating_point() or like.numel() == 0:
        return like
    generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    if like.ndim >= 2:
        fan_in = like[0].numel()
        gain = HEAD_GAIN if name.endswith(head_suffixes) else 1.0
        std = gain / math.sqrt(fan_in)
    elif bool((like == like.flatten()[0]).all()):
        return like
    else:  # a learned vector (class embedding, positional table row): small noise
        std = 0.02
    return (torch.randn(like.shape, generator=generator, dtype=torch.float32) * std).to(like.dtype)


def seeded_tensors(config, architecture: str, seed: int = SEED) -> dict:
    """The checkpoint's tensors: transformers' model for the config, in the Hub's layout, each
    tensor redrawn from the seed (raises adapter.numerics.NoTransformersModel)."""
    import torch

    from vlcheck.adapter import numerics

    cls = numerics.hf_model_class(config, architecture)
    torch.manual_seed(seed)
    model = cls._from_config(config, dtype=torch.float32)
    tensors = numerics.hub_layout_tensors(model)
    tied = not any(name.endswith(HEAD_SUFFIXES) for name in tensors)
    heads = EMBEDDING_SUFFIXES if tied else HEAD_SUFFIXES
    return {name: draw(name, t, seed, heads).contiguous() for name, t in sorted(tensors.items())}


def save_seeded_weights(config, architecture: str, out: Path, seed: int = SEED) -> None:
    """Write `model.safetensors` (float32) into a checkpoint folder; config.json is left as is.

    Where vLLM is loaded, drawn in a fresh process (`core.fresh_process`: vLLM patches transformers'
    classes in place; in CI a checkpoint built after such an engine failed with "Current vLLM
    config is not set")."""
    from vlcheck.core.fresh_process import call_apart_from_vllm

    call_apart_from_vllm(_save, config, architecture, out, seed)


def _save(config, architecture: str, out: Path, seed: int) -> None:
    from safetensors.torch import save_file

    save_file(seeded_tensors(config, architecture, seed), str(out / WEIGHTS_FILE), metadata={"format": "pt"})
