"""Where a `sample` render starts (torch): the latents it was handed, or an empty latent, put at
the first sigma of its schedule as ComfyUI's samplers put them, for every flow family that
serves the primitives."""

from __future__ import annotations

import torch

from inline_core.diffusion.flow.schedule import FlowMatchSchedule


def starting_latents(
    schedule: FlowMatchSchedule,
    noise: torch.Tensor,
    start: torch.Tensor | None,
    *,
    add_noise: bool,
    start_step: int,
) -> torch.Tensor:
    """The latents the first step sees: `start` (zeros for an empty latent) noised to the
    first sigma; without added noise (KSamplerAdvanced's add_noise disable) `start` as it is,
    at that sigma; a whole render from an empty latent starts from the noise itself."""
    if not add_noise:
        return schedule.unnoised(torch.zeros_like(noise) if start is None else start)
    if start is None and start_step == 0:
        return noise
    return schedule.noised(torch.zeros_like(noise) if start is None else start, noise)
