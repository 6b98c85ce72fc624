"""Which folder a family-config's CPU checks and render servers read."""

from __future__ import annotations

from pathlib import Path

from vlcheck.checkpoints.synthetic import checkpoint_dir
from vlcheck.spec.models import local_dir
from vlcheck.spec.schema import FamilySpec, Variant


def model_files(spec: FamilySpec, variant: Variant) -> Path:
    """The folder whose config, tokenizer and processor files are read: a local model folder's own
    (a user's fine-tune, as they serve it), else the synthetic checkpoint of its family (built on
    first use; raises NotBuildable)."""
    return local_dir(variant.model) or checkpoint_dir(spec, variant)
