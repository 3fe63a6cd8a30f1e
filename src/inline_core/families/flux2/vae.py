"""FLUX.2's autoencoder as a VAE component (torch): the transformer's latents are the VAE's 32
channels patchified 2x2 (128 channels at 1/16 of the pixels), normalised by the batch norm's
running statistics, as `Flux2KleinPipeline` encodes and decodes them. Those are the latents it
takes and gives (`components.interfaces.VAE`): 128 channels, 16 pixels per latent cell, so the
primitives (`vae/encode`, `vae/decode`, an empty latent) size them from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Latents
from inline_core.diffusion.placement import OffloadSwap, PlacementLike

PATCH = 2


def patchify(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, 4C, H/2, W/2), as the pipeline's `_patchify_latents`."""
    b, c, h, w = latents.shape
    x = latents.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(b, c * 4, h // 2, w // 2)


def unpatchify(latents: torch.Tensor) -> torch.Tensor:
    b, c, h, w = latents.shape
    x = latents.reshape(b, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(b, c // 4, h * 2, w * 2)


class Flux2VAE:
    def __init__(self, autoencoder: nn.Module, placement: PlacementLike, swap: OffloadSwap) -> None:
        from diffusers.image_processor import VaeImageProcessor

        self.autoencoder = autoencoder
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        config = cast(Any, autoencoder).config
        # Pixels per cell of the patchified latents: the autoencoder's 8, then the 2x2 patch.
        self.spatial_factor = 2 ** (len(config.block_out_channels) - 1) * PATCH
        self.latent_channels = int(config.latent_channels) * PATCH * PATCH
        self.eps = float(config.batch_norm_eps)
        self.pixel_multiple = self.spatial_factor
        self.processor = VaeImageProcessor(vae_scale_factor=self.pixel_multiple)
        if placement.vae_tiling:
            cast(Any, autoencoder).enable_tiling()

    @property
    def dtype(self) -> torch.dtype:
        return next(self.autoencoder.parameters()).dtype

    def _stats(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bn = cast(Any, self.autoencoder).bn
        mean = bn.running_mean.view(1, -1, 1, 1).to(like.device, like.dtype)
        std = torch.sqrt(bn.running_var.view(1, -1, 1, 1) + self.eps).to(like.device, like.dtype)
        return mean, std

    def encode(self, image: Any, generator: Any, /) -> Latents:
        """An RGB PIL image (sides multiples of 16) -> its normalised patchified latents;
        `generator` samples the posterior (None: its mode)."""
        pixels: torch.Tensor = cast(Any, self.processor).preprocess(cast(Image.Image, image))
        return self.encode_pixels(pixels, generator)

    def encode_pixels(self, pixels: torch.Tensor, generator: Any = None, /) -> Latents:
        """(N, 3, H, W) pixels in [-1, 1] -> normalised patchified latents: the posterior's mode
        (as the pipeline encodes reference images), or a sample drawn with `generator`."""
        pixels = pixels.to(device=self.device, dtype=self.dtype)
        with self.swap.use(self.autoencoder, self.placement):
            dist = cast(Any, self.autoencoder).encode(pixels).latent_dist
            raw: torch.Tensor = dist.mode() if generator is None else dist.sample(generator)
        latents = patchify(raw)
        mean, std = self._stats(latents)
        normalised = (latents - mean) / std
        return Latents(normalised, tuple(normalised.shape))

    def decode(self, latents: Latents, /) -> Image.Image:
        return self.decode_many([latents])[0]

    def decode_many(self, latents: Sequence[Latents], /) -> list[Image.Image]:
        """Patchified normalised latents of one shape, decoded in one call: one image each."""
        x = torch.cat([cast(torch.Tensor, lat.value) for lat in latents])
        mean, std = self._stats(x)
        x = unpatchify(x * std + mean).to(self.dtype)
        with self.swap.use(self.autoencoder, self.placement):
            image = cast(Any, self.autoencoder).decode(x, return_dict=False)[0]
        images = cast(list[Image.Image], self.processor.postprocess(image, output_type="pil"))
        if len(images) != len(latents):
            raise RuntimeError(f"decoded {len(images)} images from {len(latents)} latents")
        return images
