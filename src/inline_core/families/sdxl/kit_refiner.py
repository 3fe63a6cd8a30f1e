"""The tiny kit's SDXL refiner: an all-in-one checkpoint in the original naming, as
`sd_xl_refiner_1.0.safetensors` is laid out, written into `checkpoints/`.

Its UNet is a refiner's: conditioned on OpenCLIP-G alone (cross-attention as wide as G's states),
its size embedding five numbers (height, width, the crop's two, the aesthetic score), and no
attention on its last level, where its middle block still has some (the refiner's shape). Its one
text encoder is OpenCLIP-G at `conditioner.embedders.0.model.`; its VAE the base's. The kit's
base and refiner share their OpenCLIP-G and VAE weights, as Stability's two checkpoints do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from inline_core.diffusion.formats import clip
from inline_core.diffusion.kit import save_weights, seeded
from inline_core.diffusion.libs import diffusers
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.kit_checkpoint import original_checkpoint
from inline_core.families.sdxl.refiner import AESTHETIC_NUMBERS

REFINER_SEED = 6


def refiner_unet_config(g_width: int, g_projection: int) -> dict[str, Any]:
    channels = (64, 128, 128)
    return {
        "sample_size": 128,
        "in_channels": 4,
        "out_channels": 4,
        "block_out_channels": channels,
        "layers_per_block": 2,
        # The last level has no attention; the middle block reads the last depth (2).
        "transformer_layers_per_block": (1, 2, 2),
        "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
        "attention_head_dim": [max(c // unet.HEAD_WIDTH, 1) for c in channels],
        "use_linear_projection": True,
        "cross_attention_dim": g_width,
        "addition_embed_type": "text_time",
        "addition_time_embed_dim": unet.TIME_EMBED_DIM,
        "projection_class_embeddings_input_dim": g_projection
        + AESTHETIC_NUMBERS * unet.TIME_EMBED_DIM,
    }


def build_refiner_unet(g_width: int, g_projection: int) -> Any:
    seeded(REFINER_SEED)
    model = diffusers().UNet2DConditionModel(**refiner_unet_config(g_width, g_projection))
    with torch.no_grad():  # random output weights: every refiner step counts
        for p in model.conv_out.parameters():
            p.normal_(0.0, 0.05)
    return model.eval()


def write_refiner_checkpoint(
    out: Path, name: str, second: Any, vae: Any, weights: torch.dtype
) -> tuple[Path, Any]:
    """`checkpoints/<name>_refiner.safetensors` over OpenCLIP-G `second` and `vae`; the file and
    its UNet (diffusers')."""
    config = second.config
    model = build_refiner_unet(int(config.hidden_size), int(config.projection_dim))
    encoder = ("conditioner.embedders.0.model.", clip.to_openclip(second.state_dict()))
    state = original_checkpoint(model, vae, (encoder,))
    path = out / "checkpoints" / f"{name}_refiner.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights(state, path, weights)
    return path, model
