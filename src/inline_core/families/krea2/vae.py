"""The Qwen-Image VAE as an image VAE component (torch): Krea 2's latents (16 channels at 1/8 of
the pixels) normalised by the VAE's latent statistics, decoded one frame deep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Latents
from inline_core.diffusion.placement import OffloadSwap, PlacementLike


class QwenImageVAE:
    def __init__(self, autoencoder: nn.Module, placement: PlacementLike, swap: OffloadSwap) -> None:
        from diffusers.image_processor import VaeImageProcessor

        self.autoencoder = autoencoder
        self.placement = placement
        self.swap = swap
        config = cast(Any, autoencoder).config
        self.spatial_factor = 2 ** len(config.temperal_downsample)
        self.channels = int(config.z_dim)
        self.mean = torch.tensor(config.latents_mean).view(1, self.channels, 1, 1, 1)
        self.std = torch.tensor(config.latents_std).view(1, self.channels, 1, 1, 1)
        self.processor = VaeImageProcessor(vae_scale_factor=self.spatial_factor * 2)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.autoencoder.parameters()).dtype

    def decode(self, latents: Latents, /) -> Image.Image:
        return self.decode_many([latents])[0]

    def decode_many(self, latents: Sequence[Latents], /) -> list[Image.Image]:
        """(1, C, 1, h, w) normalised latents of one shape, decoded in one call."""
        x = torch.cat([cast(torch.Tensor, lat.value) for lat in latents]).to(self.dtype)
        mean = self.mean.to(x.device, x.dtype)
        std = (1.0 / self.std).to(x.device, x.dtype)
        x = x / std + mean
        with self.swap.use(self.autoencoder, self.placement):
            image = cast(Any, self.autoencoder).decode(x, return_dict=False)[0][:, :, 0]
        return cast(list[Image.Image], self.processor.postprocess(image, output_type="pil"))
