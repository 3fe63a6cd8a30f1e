"""The hires pass's turn in a render: the first pass's latents scaled up, noised, resized.

ComfyUI's `LatentUpscale` is `torch.nn.functional.interpolate(latents, size, mode=method)`
(`comfy.utils.common_upscale`); its second KSampler draws its noise at the new size from its
seed (the whole latent batch at once, on the CPU) and scales it to its first sigma. SDXL's size
conditioning follows the new latent's size, as ComfyUI reads it off the noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.nn import functional

from inline_core.components.interfaces import Latents
from inline_core.families.sdxl.hires import SIZE_STEP

if TYPE_CHECKING:
    from inline_core.families.sdxl.request import SDXLRequest
    from inline_core.families.sdxl.schedule import DiscreteSchedule


def seeded_noise(state: SDXLRequest, shape: tuple[int, ...]) -> torch.Tensor:
    """KSampler's noise for the request's row of a latent batch of `shape` (one row's shape)."""
    generator = torch.Generator("cpu").manual_seed(state.seed)
    drawn = torch.randn((state.batch_size, *shape[1:]), generator=generator, dtype=torch.float32)
    return drawn[state.batch_index : state.batch_index + 1]


def upscale_latents(latents: torch.Tensor, width: int, height: int, method: str) -> torch.Tensor:
    """ComfyUI's latent upscale (crop disabled) to `width` x `height` pixels."""
    size = (height // SIZE_STEP, width // SIZE_STEP)
    return functional.interpolate(latents, size=size, mode=method)


def enter_hires(state: SDXLRequest, schedule: DiscreteSchedule) -> None:
    """From the hires pass's first step on: its latents, and its size for the batch key and
    the size conditioning."""
    hires = state.hires
    if hires is None or state.latents is None:
        raise RuntimeError("a hires switch on a request without a hires pass")
    x = upscale_latents(
        torch.as_tensor(state.latents.value), hires.width, hires.height, hires.method
    )
    noise = seeded_noise(state, tuple(x.shape)).to(x.device)
    state.width, state.height = hires.width, hires.height
    state.latents = Latents(schedule.hires_start(noise, x), tuple(x.shape))
