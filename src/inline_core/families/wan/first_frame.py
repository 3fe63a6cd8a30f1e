"""Wan's first-frame conditioning: the arithmetic of diffusers' `WanImageToVideoPipeline`, one
request at a time, in its two forms.

Wan 2.2 TI2V (`expand_timesteps`): per-token timesteps.

The image is resized to the render's size as diffusers' video processor resizes it (a Lanczos
stretch to width x height, no crop) and encoded into one latent frame. A mask of ones with its
first latent frame at zero puts that frame in place of the noise's first frame before every
forward and in the final latents, and gives its tokens timestep 0: the model sees a clean first
frame and denoises the rest. Text-to-video on the same model is the mask of all ones.

By channels (Wan 2.2 A14B i2v, 36 channels in): the image followed by `frames - 1` black frames
is encoded as a video, and a 4-channel mask (ones on the first latent frame: its four "frames"
are the image) goes before those latents; the 20 channels ride beside the noisy latents in every
forward, and the final latents are the denoised ones as they are.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from PIL import Image

from inline_core.families.wan.variants import PATCH


def first_frame_mask(latent_shape: tuple[int, int, int], device: torch.device) -> torch.Tensor:
    """(1, 1, F, h, w): 0 on the first latent frame (the image's), 1 on the frames to denoise."""
    mask = torch.ones(1, 1, *latent_shape, dtype=torch.float32, device=device)
    mask[:, :, 0] = 0
    return mask


def all_frames_mask(latent_shape: tuple[int, int, int], device: torch.device) -> torch.Tensor:
    """Text-to-video on a TI2V model: every latent frame is denoised."""
    return torch.ones(1, 1, *latent_shape, dtype=torch.float32, device=device)


def with_first_frame(
    latents: torch.Tensor, condition: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """The latents with the image's latent frame in place of their first."""
    return (1 - mask) * condition + mask * latents


def token_timesteps(mask: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """(1, tokens): each latent token's timestep (0 for the image's), in the transformer's
    token order (frames, then 2x2 patches of rows and columns)."""
    return (mask[0][0][:, ::PATCH, ::PATCH] * t).flatten().unsqueeze(0)


def channel_condition(latents: torch.Tensor) -> torch.Tensor:
    """(1, 4 + C, F, h, w): the first-frame mask before the encoded image-and-black video."""
    mask = torch.zeros(1, 4, *latents.shape[2:], dtype=latents.dtype, device=latents.device)
    mask[:, :, 0] = 1
    return torch.cat([mask, latents], dim=1)


def video_pixels(image: torch.Tensor, frames: int) -> torch.Tensor:
    """(1, 3, frames, H, W): the image's frame, then black (zeros in (-1, 1)) to `frames`."""
    rest = image.new_zeros(image.shape[0], image.shape[1], frames - 1, *image.shape[3:])
    return torch.cat([image, rest], dim=2)


def image_pixels(image: Image.Image, width: int, height: int, spatial_factor: int) -> torch.Tensor:
    """(1, 3, 1, height, width) floats in (-1, 1), as diffusers' video processor prepares them."""
    from diffusers.video_processor import VideoProcessor

    processor: Any = VideoProcessor(vae_scale_factor=spatial_factor)
    pixels = processor.preprocess(image.convert("RGB"), height=height, width=width)
    return cast(torch.Tensor, pixels).to(torch.float32).unsqueeze(2)
