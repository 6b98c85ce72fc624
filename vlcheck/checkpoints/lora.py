"""Synthetic LoRA adapters over a seeded checkpoint, made and saved by peft as users save theirs
(`adapter_config.json` and `adapter_model.safetensors`), on the language model's linear layers.

peft starts an adapter as a no-op (its B matrices are zero): here every lora_A and lora_B matrix
is redrawn from the seed as the seeded checkpoints' weights are (`seeded.draw`, std
`gain / sqrt(fan_in)`), scaled by `GAIN`, so that the adapter moves the next-token logprobs by
about a nat: enough to tell an applied adapter from none, and one adapter from another.

Adapters `a` and `b` leave the vision tower and the projector out, as most adapters users serve on
vLLM are trained; adapter `c` also targets the projector's linear layers (the connector), which vLLM
loads only with `enable_tower_connector_lora`, for the models that support it (`lora_tower`).
Built once per checkpoint content, recipe, builder code and peft/transformers versions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from vlcheck.checkpoints.derived import built_once, package_code

RANK = 8
ALPHA = 16
GAIN = 0.5
"""Over `seeded.draw`'s std, for A and B alike: the update B.A.x then has about a quarter of the
layer's own output scale times alpha / rank (2)."""
ADAPTERS = {"a": 1, "b": 2, "c": 3}
"""The adapters, by name, with their seeds (also their LoRA ids): `a` and `b` on the language model
(two, so that one batch can mix them), `c` on the language model and the connector."""
WITH_CONNECTOR = ("c",)

BUILDER_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


class NoLanguageModel(RuntimeError):
    """transformers' model has no language model whose linear layers an adapter could target."""


@dataclass(frozen=True)
class Recipe:
    rank: int = RANK
    alpha: int = ALPHA
    gain: float = GAIN
    seed: int = 1
    connector: bool = False


def language_model_linears(model) -> list[str]:
    """The qualified names of the language model's linear layers (`get_decoder()`: transformers'
    handle on a VLM's text model), the output head excluded."""
    import torch

    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    prefix = next((name for name, module in model.named_modules() if module is decoder and name), None)
    if prefix is None:
        raise NoLanguageModel(f"{type(model).__name__}: get_decoder() names no submodule")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = [name for name, module in model.named_modules()
             if name.startswith(prefix + ".") and isinstance(module, torch.nn.Linear) and module is not head
             and not name.endswith("lm_head")]  # blip-2's decoder is OPTForCausalLM: its head sits inside it
    if not names:
        raise NoLanguageModel(f"{type(model).__name__}: no linear layer under {prefix}")
    return names


def connector_linears(model) -> list[str]:
    """The qualified names of the linear layers of the outermost projector module (the connector)."""
    import torch

    from vlcheck.adapter.engine import PROJECTOR_NAMES  # transformers' VLMs name it as vLLM's do

    roots = [n for n, _ in model.named_modules() if PROJECTOR_NAMES.match(n.rsplit(".", 1)[-1])]
    if not roots:
        raise NoLanguageModel(f"{type(model).__name__}: no projector module by the usual names to put an adapter on")
    root = min(roots, key=lambda n: (n.count("."), n))
    return [n for n, m in model.named_modules() if (n == root or n.startswith(root + ".")) and isinstance(m, torch.nn.Linear)]


def _code() -> dict[str, str]:
    return package_code("peft", "transformers", "torch")


def adapter_dir(checkpoint: Path, architecture: str, name: str) -> Path:
    """The adapter `name` (one of ADAPTERS) over the seeded `checkpoint`, built on first use.
    Raises ImportError without peft, NoLanguageModel where there is nothing to target."""
    recipe = Recipe(seed=ADAPTERS[name], connector=name in WITH_CONNECTOR)
    content = {"checkpoint": Path(checkpoint).name, "architecture": architecture, "recipe": asdict(recipe),
               "builder": BUILDER_HASH, "packages": _code()}
    return built_once(Path(checkpoint), f"lora-{name}", content, "adapter_config.json",
                      lambda out: _build(Path(checkpoint), architecture, recipe, out))


def _build(checkpoint: Path, architecture: str, recipe: Recipe, out: Path) -> None:
    import peft
    import torch

    from vlcheck.adapter import numerics
    from vlcheck.checkpoints.seeded import draw

    model, _ = numerics.hf_load(checkpoint, architecture)
    targets = language_model_linears(model) + (connector_linears(model) if recipe.connector else [])
    config = peft.LoraConfig(r=recipe.rank, lora_alpha=recipe.alpha, target_modules=targets, lora_dropout=0.0,
                             bias="none")
    wrapped = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if ".lora_A." in name or ".lora_B." in name:
                param.copy_(draw(name, param.data, seed=recipe.seed) * recipe.gain)
    wrapped.save_pretrained(str(out))
    (out / "vlcheck-adapter.json").write_text(json.dumps({"targets": targets, "recipe": asdict(recipe),
                                                         "packages": _code()}, indent=1) + "\n")
