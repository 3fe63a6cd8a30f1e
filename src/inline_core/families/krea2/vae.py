"""The Qwen-Image VAE as Krea 2's image VAE component (torch): its latents (16 channels at 1/8 of
the pixels, `(1, C, 1, h, w)`) normalised by the VAE's latent statistics, decoded one frame deep
by the decode every family that reads this VAE shares (`diffusion/vae/qwen_image_vae.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Latents
from inline_core.diffusion.placement import OffloadSwap, PlacementLike
from inline_core.diffusion.vae.qwen_image_vae import decode_frames


class QwenImageVAE:
    def __init__(self, autoencoder: nn.Module, placement: PlacementLike, swap: OffloadSwap) -> None:
        from diffusers.image_processor import VaeImageProcessor

        self.autoencoder = autoencoder
        self.placement = placement
        self.swap = swap
        config = cast(Any, autoencoder).config
        self.spatial_factor = 2 ** len(config.temperal_downsample)
        self.processor = VaeImageProcessor(vae_scale_factor=self.spatial_factor * 2)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.autoencoder.parameters()).dtype

    def decode(self, latents: Latents, /) -> Image.Image:
        return self.decode_many([latents])[0]

    def decode_many(self, latents: Sequence[Latents], /) -> list[Image.Image]:
        """(1, C, 1, h, w) normalised latents of one shape, decoded in one call."""
        x = torch.cat([cast(torch.Tensor, lat.value) for lat in latents]).to(self.dtype)
        with self.swap.use(self.autoencoder, self.placement):
            return decode_frames(self.autoencoder, x, self.processor)
