"""The Qwen-Image VAE's decode (torch), for every family whose latents it decodes: one frame of
`(B, C, 1, h, w)` latents normalised per channel, un-normalised as `QwenImagePipeline` and
`Krea2Pipeline` do it (the inverse std computed in float32, then cast), decoded and turned into
pixels by diffusers' image processor, so the pixels match."""

from __future__ import annotations

from typing import Any, cast

import torch
from PIL import Image
from torch import nn


def decode_frames(autoencoder: nn.Module, latents: torch.Tensor, images: Any) -> list[Image.Image]:
    """Normalised `(B, C, 1, h, w)` latents -> B images; `images` is the caller's
    `VaeImageProcessor`. The caller holds the autoencoder on its device."""
    vae = cast(Any, autoencoder)
    config = vae.config
    shape = (1, int(config.z_dim), 1, 1, 1)
    mean = torch.tensor(config.latents_mean).view(shape).to(latents.device, latents.dtype)
    inverse_std = (1.0 / torch.tensor(config.latents_std).view(shape)).to(
        latents.device, latents.dtype
    )
    pixels = vae.decode(latents / inverse_std + mean, return_dict=False)[0][:, :, 0]
    return cast(list[Image.Image], images.postprocess(pixels, output_type="pil"))
