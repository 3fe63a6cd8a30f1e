"""Masks and control contexts for Z-Image's inpaint and control renders (torch side).

The arithmetic is diffusers': a mask is read as grayscale at the output size and binarised (white
repaints, black keeps), then taken to latent size by nearest neighbour. Plain inpainting blends the
kept part back after each step (`ZImageInpaintPipeline`); a control model's context is the control
image's latents (the posterior's mode), followed, for a model that takes them, by the kept-part
mask and the masked image's latents (`ZImageControlNetInpaintPipeline`) or by zeros
(`ZImageControlNetPipeline` with a 2.x model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from PIL import Image

from inline_core.components.interfaces import Latents
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.masks import latent_size, mask_pixels, rgb_at
from inline_core.diffusion.vae.autoencoder_kl import AutoencoderKLVAE


@dataclass(eq=False)
class InpaintBlend:
    """What plain inpainting keeps: the mask at latent size (1 repaints), the image's latents and
    the noise the render started from."""

    mask: torch.Tensor
    image_latents: torch.Tensor
    noise: torch.Tensor

    def blend(self, schedule: FlowMatchSchedule, index: int, latents: Latents) -> Latents:
        """The latents after step `index`, with the kept part put back at the next level."""
        known = self.image_latents
        if index < schedule.step_count - 1:
            known = schedule.renoised(index, known, self.noise)
        value = cast(torch.Tensor, latents.value)
        return Latents((1 - self.mask) * known + self.mask * value, latents.shape)


def control_context(
    vae: AutoencoderKLVAE,
    control: Image.Image,
    width: int,
    height: int,
    in_dim: int,
    masked: tuple[Image.Image, Image.Image] | None = None,
) -> torch.Tensor:
    """A control model's input for one request, `(in_dim, 1, h, w)`. `masked`: (image, mask) for
    a model that inpaints."""
    latents = cast(torch.Tensor, vae.encode(rgb_at(control, width, height), None).value)
    parts = [latents]
    if masked is not None:
        image, mask = masked
        pixels = mask_pixels(mask, width, height, vae.pixel_multiple).to(latents.device)
        source = cast(Any, vae.processor).preprocess(rgb_at(image, width, height))
        kept = source.to(latents.device) * (pixels < 0.5)
        kept_latents = cast(torch.Tensor, vae.encode_pixels(kept, None).value)
        keep_mask = latent_size(1 - pixels, kept_latents.shape).to(latents.dtype)
        parts += [keep_mask, kept_latents]
    return padded_context(torch.cat(parts, dim=1), in_dim)


def inpaint_context(
    control: torch.Tensor, repaint: torch.Tensor | None, inpaint: torch.Tensor
) -> torch.Tensor:
    """`(1, C, h, w)` control latents followed by the kept-part mask (`1 - repaint` at latent
    size; zeros without a mask: nothing kept) and the masked image's latents."""
    if repaint is None:
        keep = control.new_zeros((control.shape[0], 1, *control.shape[2:]))
    else:
        keep = 1 - repaint.to(control.device, control.dtype)
    return torch.cat([control, keep, inpaint.to(control.dtype)], dim=1)


def padded_context(context: torch.Tensor, in_dim: int) -> torch.Tensor:
    """`(1, C, h, w)` latents -> the control model's `(in_dim, 1, h, w)` input: a 2.x model's
    mask and image channels, where none were given, are zeros (as diffusers pads them)."""
    missing = in_dim - context.shape[1]
    if missing < 0:
        raise ValueError(f"the control context has {context.shape[1]} channels, over {in_dim}")
    if missing:  # a 2.x model without an inpaint: zeros where the mask and image would be
        zeros = context.new_zeros((context.shape[0], missing, *context.shape[2:]))
        context = torch.cat([context, zeros], dim=1)
    return context.unsqueeze(2)[0]
