"""One request's private flow-matching schedule, with Z-Image's turbo sigmas and shift.

Each request gets its own copy of the scheduler (steps advance per request, so requests at
different steps can share a forward). The math follows `ZImagePipeline` and
`ZImageImg2ImgPipeline`: sigmas `linspace(1, 1/N, N)` (the turbo schedule does not end at 0), `mu`
from the image token count, the transformer fed `(1000 - t) / 1000`, img2img starting at
`N - int(N * strength)`. The low-level `sample` node may pick another sampler and sigma schedule
(`flow_samplers.py`) and ComfyUI's `denoise`; the defaults are the pipeline's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch

from inline_core.components.diffusers_zimage.flow_samplers import (
    denoise_window,
    model_sigmas,
    sampler_scheduler,
)
from inline_core.components.diffusers_zimage.libs import module, to_floats
from inline_core.components.interfaces import Latents


def img2img_start(steps: int, strength: float) -> int:
    """The first step an img2img render runs (diffusers' `get_timesteps`)."""
    init_timestep = min(steps * strength, steps)
    return int(max(steps - init_timestep, 0))


class FlowMatchSchedule:
    def __init__(self, scheduler: Any, timesteps: torch.Tensor) -> None:
        self.scheduler = scheduler
        self.timesteps = timesteps
        # Computed once, so the loop never syncs a device value per step.
        self.model_timesteps = (1000 - timesteps) / 1000
        self.t_norms: list[float] = to_floats(self.model_timesteps)

    @classmethod
    def create(
        cls,
        config: Mapping[str, Any],
        steps: int,
        image_seq_len: int,
        device: torch.device,
        strength: float | None = None,
        *,
        sampler: str = "euler",
        schedule: str = "simple",
        denoise: float = 1.0,
    ) -> FlowMatchSchedule:
        """`strength` is img2img as diffusers counts it (skip the first steps of N); `denoise`
        is ComfyUI's (run the last N steps of a longer schedule)."""
        calculate_shift = module("diffusers.pipelines.z_image.pipeline_z_image").calculate_shift
        mu: float = calculate_shift(
            image_seq_len,
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        total, first = denoise_window(steps, denoise)
        sigmas = model_sigmas(config, total, mu, schedule)[first:]
        scheduler = sampler_scheduler(sampler, sigmas, device)
        timesteps = cast(torch.Tensor, scheduler.timesteps)
        begin = 0
        if strength is not None:
            begin = img2img_start(steps, strength) * int(scheduler.order)
            timesteps = timesteps[begin:]
        scheduler.set_begin_index(begin)
        return cls(scheduler, timesteps)

    @property
    def step_count(self) -> int:
        return int(self.timesteps.shape[0])

    def model_timestep(self, index: int, /) -> torch.Tensor:
        return self.model_timesteps[index : index + 1]

    def step(self, index: int, noise_pred: Any, latents: Latents, /) -> Latents:
        t = self.timesteps[index]
        pred = cast(torch.Tensor, noise_pred).to(torch.float32)
        out = self.scheduler.step(pred, t, latents.value, return_dict=False)[0]
        return Latents(out, latents.shape)

    def scale_noise(self, image_latents: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """img2img's starting point: the encoded image noised to the first timestep."""
        t = self.timesteps[:1].repeat(image_latents.shape[0])
        return cast(torch.Tensor, self.scheduler.scale_noise(image_latents, t, noise))

    def noised(self, latents: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """`latents` noised to the first sigma this schedule visits, by the flow forward process
        `sigma * noise + (1 - sigma) * x` (for any sampler; not all of them have `scale_noise`)."""
        begin = int(self.scheduler.begin_index or 0)
        sigma = cast(torch.Tensor, self.scheduler.sigmas)[begin].to(latents.device, latents.dtype)
        return sigma * noise + (1.0 - sigma) * latents
