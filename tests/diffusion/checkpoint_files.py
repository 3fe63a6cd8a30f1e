"""Tiny all-in-one checkpoints made from a kit's split files, in ComfyUI's layout."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from inline_core.diffusion.libs import load_safetensors, save_safetensors


def write_checkpoint(target: Path, parts: Mapping[str, Path]) -> None:
    """One file holding each split file's tensors under its prefix (e.g. `model.diffusion_model.`
    for the diffusion model, `first_stage_model.` for the VAE)."""
    tensors: dict[str, torch.Tensor] = {}
    for prefix, file in parts.items():
        tensors.update({prefix + k: v for k, v in load_safetensors(file).items()})
    target.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors(tensors, target)
