"""A tiny random-weight TAESD decoder for a latent format, in ComfyUI's naming (for the kit).

Written as `vae_approx/<name>_decoder.safetensors`, the file ComfyUI and `tiny_decoder.py` look
for, so the `taesd` previews load and run a real decoder in the tests. The real ones have 64
channels and 3 blocks a stage; this one has the same layout (4 stages, 8x up) at test size.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from inline_core.diffusion.formats.taesd import TinyDecoderConfig, to_comfy_key
from inline_core.diffusion.kit import save_weights, seeded
from inline_core.diffusion.libs import module
from inline_core.diffusion.preview.formats import PreviewFormat


def tiny_decoder_config(fmt: PreviewFormat) -> TinyDecoderConfig:
    return TinyDecoderConfig(
        latent_channels=fmt.channels,
        out_channels=3,
        num_blocks=(1, 1, 1, 1),
        block_out_channels=(16, 16, 16, 16),
    )


def write_tiny_decoder(models: Path, fmt: PreviewFormat, seed: int = 7) -> Path:
    if fmt.tiny_decoder is None:
        raise ValueError(f"{fmt.name} latents have no tiny decoder name")
    seeded(seed)
    decoder = module("diffusers.models.autoencoders.vae").DecoderTiny(
        **tiny_decoder_config(fmt).to_diffusers()
    )
    state = cast(dict[str, torch.Tensor], decoder.state_dict())
    comfy = {to_comfy_key(k): v for k, v in state.items()}
    path = models / "vae_approx" / f"{fmt.tiny_decoder}_decoder.safetensors"
    return save_weights(comfy, path, torch.float32)
