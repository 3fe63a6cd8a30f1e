"""SDXL inpainting with its own UNet (torch side), as diffusers' `StableDiffusionXLInpaintPipeline`
runs a 4-channel UNet: the mask read at the output size and binarised (white repaints), taken to
latent size by nearest neighbour; the image's latents noised to the render's first level as
img2img starts; after each step the kept part is put back, the image's latents noised to the
next level with the noise the render started from (at the last step: the image's latents
themselves).

The walk is in sigma space (`x = x0 + sigma * noise`), where diffusers' `add_noise` of every
discrete scheduler lands on the same point, so the blend is one formula for each sampler that
calls the model once a step. A sampler that calls it more often has points between the levels
where diffusers' blend has no counterpart: refused, naming it.

An inpaint UNet (9 input channels: SDXL's inpainting checkpoints) blends nothing: each call sees
the latents, the mask and the masked image's latents side by side (`InpaintChannels`), as the
same pipeline feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from PIL import Image

from inline_core.diffusion.masks import latent_size, mask_pixels
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.request import LATENT_FACTOR
from inline_core.families.sdxl.schedule import DiscreteSchedule


@dataclass(eq=False)
class InpaintBlend:
    mask: torch.Tensor  # (1, 1, h, w), 1 repaints
    image_latents: torch.Tensor
    noise: torch.Tensor

    @classmethod
    def of(
        cls,
        mask: Image.Image,
        image_latents: torch.Tensor,
        noise: torch.Tensor,
        schedule: DiscreteSchedule,
        sampler: str,
    ) -> InpaintBlend:
        if len(schedule.levels) != len(schedule.sigmas) - 1:
            raise InvalidRequest(
                f"sampler {sampler!r} calls the model more than once a step, and inpainting puts "
                "the kept part back after each step (as StableDiffusionXLInpaintPipeline does): "
                "pick a sampler with one call a step (euler, euler_ancestral, dpmpp_2m, ...)"
            )
        height, width = (int(n) * LATENT_FACTOR for n in image_latents.shape[-2:])
        pixels = mask_pixels(mask, width, height, LATENT_FACTOR)
        at_latents = latent_size(pixels, tuple(image_latents.shape))
        return cls(at_latents.to(image_latents), image_latents, noise.to(image_latents))

    def blend(self, schedule: DiscreteSchedule, index: int, x: torch.Tensor) -> torch.Tensor:
        """`x` after `index` steps, its kept part the image's latents at that step's level."""
        kept = self.image_latents + self.noise * schedule.sigmas[index]
        return (1 - self.mask) * kept + self.mask * x


INPAINT_CHANNELS = 9  # an inpaint UNet's input: latents, the mask, the masked image's latents


@dataclass(eq=False)
class InpaintChannels:
    """An inpaint UNet's extra input channels, as `StableDiffusionXLInpaintPipeline` builds them:
    the mask at latent size (1 repaints) and the latents of the image with its repainted part
    blanked (0 in [-1, 1]: mid-gray), each model call's latents followed by both."""

    mask: torch.Tensor
    masked_latents: torch.Tensor

    @classmethod
    def of(
        cls,
        vae: AutoencoderKLVAE,
        image: Image.Image,
        mask: Image.Image,
        generator: torch.Generator,
        shape: tuple[int, ...],
    ) -> InpaintChannels:
        height, width = (int(n) * LATENT_FACTOR for n in shape[-2:])
        pixels = mask_pixels(mask, width, height, LATENT_FACTOR)
        source = cast(Any, vae.processor).preprocess(image)
        blanked = source * (pixels < 0.5)
        encoded = cast(torch.Tensor, vae.encode_pixels(blanked, generator).value)
        at_latents = latent_size(pixels, shape).to(encoded)
        return cls(at_latents, encoded)

    def model_input(self, x: torch.Tensor) -> torch.Tensor:
        mask, masked = self.mask.to(x), self.masked_latents.to(x)
        return torch.cat([x, mask, masked], dim=1)
