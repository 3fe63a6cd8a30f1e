"""Which steps of a schedule a render runs: img2img's strength and ComfyUI's denoise (torch-free,
so a request can be checked before anything is loaded)."""

from __future__ import annotations

# ComfyUI's KSampler treats a denoise this close to 1 as a full render.
FULL_DENOISE = 0.9999


def img2img_start(steps: int, strength: float) -> int:
    """The first step an img2img render runs (diffusers' `get_timesteps`)."""
    init_timestep = min(steps * strength, steps)
    return int(max(steps - init_timestep, 0))


def denoise_window(steps: int, denoise: float) -> tuple[int, int]:
    """(schedule length, first step) for ComfyUI's `denoise`: a schedule of `steps / denoise`
    steps of which only the last `steps` run, so the render starts part-way down the noise."""
    if denoise >= FULL_DENOISE:
        return steps, 0
    total = max(int(steps / denoise), steps)
    return total, total - steps
