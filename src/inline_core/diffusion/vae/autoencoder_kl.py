"""An `AutoencoderKL` as a VAE component: latents normalised by its scaling and shift factors.

FLUX's autoencoder (16 latent channels, scaling 0.3611, shift 0.1159) is one; any family whose
VAE is an `AutoencoderKL` uses this class with its own pixel multiple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from diffusers.image_processor import VaeImageProcessor
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Latents
from inline_core.diffusion.placement import OffloadSwap, PlacementLike


class AutoencoderKLVAE:
    def __init__(
        self,
        autoencoder: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        *,
        patch: int = 1,
    ) -> None:
        self.autoencoder = autoencoder
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        config = cast(Any, autoencoder).config
        self._spatial_factor = 2 ** (len(config.block_out_channels) - 1)
        self._latent_channels = int(config.latent_channels)
        self.scaling_factor = float(config.scaling_factor)
        self.shift_factor = float(config.shift_factor or 0.0)
        # A transformer that patchifies latents `patch` x `patch` takes images in multiples of
        # that many VAE cells.
        self.pixel_multiple = self._spatial_factor * patch
        self.processor = VaeImageProcessor(vae_scale_factor=self.pixel_multiple)
        vae = cast(Any, autoencoder)
        if placement.vae_tiling:
            vae.enable_tiling()
        if placement.vae_slicing:
            vae.enable_slicing()

    @property
    def spatial_factor(self) -> int:
        return self._spatial_factor

    @property
    def latent_channels(self) -> int:
        return self._latent_channels

    @property
    def dtype(self) -> torch.dtype:
        return next(self.autoencoder.parameters()).dtype

    def encode(self, image: Any, generator: Any, /) -> Latents:
        """Encode an RGB PIL image at the output size, sampling the posterior with `generator`
        (None: its mode, so the same image always gives the same latents)."""
        pixels: torch.Tensor = cast(Any, self.processor).preprocess(cast(Image.Image, image))
        return self.encode_pixels(pixels, generator)

    def encode_pixels(self, pixels: torch.Tensor, generator: Any, /) -> Latents:
        """`encode` of pixels already preprocessed: `(N, 3, H, W)` in [-1, 1]."""
        pixels = pixels.to(device=self.device, dtype=self.dtype)
        with self.swap.use(self.autoencoder, self.placement):
            dist = cast(Any, self.autoencoder).encode(pixels).latent_dist
            raw: torch.Tensor = dist.mode() if generator is None else dist.sample(generator)
        latents = (raw - self.shift_factor) * self.scaling_factor
        return Latents(latents, tuple(latents.shape))

    def decode(self, latents: Latents, /) -> Any:
        return self.decode_many([latents])[0]

    def decode_many(self, latents: Sequence[Latents], /) -> list[Image.Image]:
        """Decode latents of one shape in one autoencoder call: one image each, in order."""
        x = torch.cat([cast(torch.Tensor, lat.value) for lat in latents]).to(self.dtype)
        x = (x / self.scaling_factor) + self.shift_factor
        with self.swap.use(self.autoencoder, self.placement):
            image = cast(Any, self.autoencoder).decode(x, return_dict=False)[0]
        images = cast(list[Image.Image], self.processor.postprocess(image, output_type="pil"))
        if len(images) != len(latents):
            raise RuntimeError(f"decoded {len(images)} images from {len(latents)} latents")
        return images
