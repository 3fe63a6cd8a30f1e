"""A kit's all-in-one checkpoint state in the original Stability naming: its UNet, its VAE and
its text encoders, each under its prefix (SDXL's base and refiner, SD 1.5's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from inline_core.diffusion.formats import ldm_vae
from inline_core.families.sdxl import unet

VAE_PREFIX = "first_stage_model."


def original_checkpoint(
    unet_model: Any, vae: Any, encoders: Sequence[tuple[str, Mapping[str, torch.Tensor]]]
) -> dict[str, torch.Tensor]:
    """`encoders`: each text encoder's prefix and its state in the checkpoint's own naming."""
    levels = len(vae.config.block_out_channels)
    parts = (
        (unet.PREFIX, unet.to_ldm(unet_model.state_dict(), dict(unet_model.config))),
        (VAE_PREFIX, ldm_vae.to_ldm(vae.state_dict(), levels)),
        *encoders,
    )
    return {
        prefix + key: value
        for prefix, sd in parts
        for key, value in sd.items()
        if not key.endswith("position_ids")
    }
