"""The Qwen-Image VAE as a component: reference images in, packed latents out, and back.

Qwen-Image's transformer sees latents packed 2x2 into 64-wide tokens; its VAE (the Wan 2.1
layout, one frame) works on `(1, 16, 1, h, w)` latents normalised per channel. The arithmetic is
`QwenImageEditPlusPipeline`'s (`_encode_vae_image`: the posterior's mode, minus the mean, over the
std) and `QwenImagePipeline`'s decode, with diffusers' own image processor for resizing and for
turning floats into pixels, so the pixels match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.diffusion.libs import module
from inline_core.diffusion.placement import OffloadSwap, PlacementLike
from inline_core.diffusion.vae.qwen_image_vae import decode_frames
from inline_core.families.qwen_image.request import MULTIPLE, PATCH, reference_size


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, 1, h, w) or (B, C, h, w) -> (B, h/2 * w/2, C * 4): diffusers' `_pack_latents`."""
    b, c, h, w = latents.shape[0], latents.shape[1], latents.shape[-2], latents.shape[-1]
    x = latents.reshape(b, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // PATCH) * (w // PATCH), c * PATCH * PATCH)


def unpack(tokens: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, tokens, C * 4) -> (B, C, 1, h, w) for an image of `height` x `width` pixels."""
    b, _n, channels = tokens.shape
    h, w = height // MULTIPLE, width // MULTIPLE
    x = tokens.view(b, h, w, channels // 4, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, channels // 4, 1, h * PATCH, w * PATCH)


class QwenImageVAE:
    def __init__(self, autoencoder: nn.Module, placement: PlacementLike, swap: OffloadSwap) -> None:
        self.autoencoder = autoencoder
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        config = cast(Any, autoencoder).config
        self.latent_channels = int(config.z_dim)
        self._mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1)
        self._std = torch.tensor(config.latents_std).view(1, -1, 1, 1, 1)
        processor = module("diffusers.image_processor").VaeImageProcessor
        self.images = processor(vae_scale_factor=MULTIPLE)  # what the pipelines resize with

    @property
    def dtype(self) -> torch.dtype:
        return next(self.autoencoder.parameters()).dtype

    def resize(self, image: Image.Image, height: int, width: int) -> Image.Image:
        return cast(Image.Image, self.images.resize(image, height, width))

    def encode_reference(self, image: Image.Image, dtype: torch.dtype) -> torch.Tensor:
        """A reference image at about a megapixel, encoded and packed: `(1, tokens, 64)`."""
        width, height = reference_size(image.size)
        pixels = cast(torch.Tensor, self.images.preprocess(image, height, width)).unsqueeze(2)
        vae = cast(Any, self.autoencoder)
        with self.swap.use(self.autoencoder, self.placement), torch.inference_mode():
            x = pixels.to(self.device, dtype)
            raw = cast(torch.Tensor, vae.encode(x).latent_dist.mode())
            mean = self._mean.to(raw.device, raw.dtype)
            std = self._std.to(raw.device, raw.dtype)
            return pack((raw - mean) / std)

    def decode_many(
        self, tokens: Sequence[torch.Tensor], height: int, width: int
    ) -> list[Image.Image]:
        """Packed latents of one size -> images, in one VAE call."""
        with self.swap.use(self.autoencoder, self.placement), torch.inference_mode():
            x = unpack(torch.cat([t.to(self.device) for t in tokens]), height, width)
            return decode_frames(self.autoencoder, x.to(self.dtype), self.images)
