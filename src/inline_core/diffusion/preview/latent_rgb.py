"""`latent2rgb`: a preview as one linear map of the latents (no weights), at latent resolution."""

from __future__ import annotations

from functools import cache

import torch
from PIL import Image

from inline_core.diffusion.preview.formats import PreviewFormat


def first_image(latents: torch.Tensor, fmt: PreviewFormat) -> torch.Tensor:
    """The first row of a latent batch as `(C, H, W)`: a video's first latent frame."""
    x = latents[0] if latents.dim() == (5 if fmt.video else 4) else latents
    if fmt.video:
        x = x[:, 0]
    if x.dim() != 3 or x.shape[0] != fmt.channels:
        raise ValueError(
            f"latents of shape {tuple(latents.shape)} are not {fmt.name}'s ({fmt.channels} "
            "channels)"
        )
    return x


@cache
def _factors(fmt: PreviewFormat, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    factors = torch.tensor(fmt.rgb_factors, dtype=torch.float32, device=device)  # (C, 3)
    return factors, torch.tensor(fmt.rgb_bias, dtype=torch.float32, device=device)


def latent_to_rgb(latents: torch.Tensor, fmt: PreviewFormat) -> Image.Image:
    """RGB from the format's factors: `(factors^T x + bias)` per cell, mapped from (-1, 1)."""
    x = first_image(latents, fmt).float()
    factors, bias = _factors(fmt, x.device)
    channels, height, width = x.shape
    rgb = torch.addmm(bias, x.reshape(channels, height * width).T, factors)
    return to_image(rgb.reshape(height, width, 3))


def to_image(rgb: torch.Tensor) -> Image.Image:
    """An `(H, W, 3)` tensor in (-1, 1) as an 8-bit image."""
    pixels = ((rgb + 1.0) * 127.5).clamp(0, 255).round().to(torch.uint8).cpu().numpy()
    return Image.fromarray(pixels, mode="RGB")
