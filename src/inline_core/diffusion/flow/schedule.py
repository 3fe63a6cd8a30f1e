"""One request's private flow-matching schedule: sigmas, shift, sampler and img2img start.

Each request gets its own copy of the scheduler (steps advance per request, so requests at
different steps can share a forward). The math follows diffusers' flow pipelines: sigmas
`linspace(1, 1/N, N)` (the schedule does not end at 0), `mu` from the image token count for the
shift, img2img starting at `N - int(N * strength)`. The timestep a transformer is fed is its
family's (`model_time`), computed once. The low-level `sample` node may pick another sampler and
sigma schedule (`samplers.py`) and ComfyUI's `denoise`; the defaults are the pipelines' own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import torch

from inline_core.components.interfaces import Latents
from inline_core.diffusion.flow.samplers import (
    Spacing,
    flow_spacing,
    model_sigmas,
    sampler_scheduler,
)
from inline_core.diffusion.flow.steps import denoise_window, img2img_start
from inline_core.diffusion.libs import to_floats

ModelTime = Callable[[torch.Tensor], torch.Tensor]


def diffusers_time(timesteps: torch.Tensor) -> torch.Tensor:
    """The timestep as most flow transformers take it: the scheduler's, over 1000."""
    return timesteps / 1000


def flow_x0(
    latents: torch.Tensor, sigma: torch.Tensor | float, prediction: torch.Tensor
) -> torch.Tensor:
    """The finished latents a flow model's prediction (`noise - x0`) points at, from latents at
    noise level `sigma`: `x0 = x_t - sigma * prediction`, a new float32 tensor on the latents'
    device (no sync: `sigma` is a float or a tensor the host holds or the device computes)."""
    if isinstance(sigma, torch.Tensor):
        sigma = sigma.to(latents.device, torch.float32)
    return latents.to(torch.float32) - sigma * prediction.to(torch.float32)


def calculate_shift(
    image_seq_len: int,
    base_seq_len: int = 256,
    max_seq_len: int = 4096,
    base_shift: float = 0.5,
    max_shift: float = 1.15,
) -> float:
    """The shift `mu` for an image of `image_seq_len` tokens: linear between the base and the
    maximum, the same arithmetic as diffusers' flow pipelines (so the sigmas match bit for bit)."""
    m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    b = base_shift - m * base_seq_len
    return image_seq_len * m + b


class FlowMatchSchedule:
    def __init__(
        self, scheduler: Any, timesteps: torch.Tensor, model_time: ModelTime = diffusers_time
    ) -> None:
        self.scheduler = scheduler
        self.timesteps = timesteps
        # Computed once, so the loop never syncs a device value per step.
        self.model_timesteps = model_time(timesteps)
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
        model_time: ModelTime = diffusers_time,
        spacing: Spacing = flow_spacing,
    ) -> FlowMatchSchedule:
        """`strength` is img2img as diffusers counts it (skip the first steps of N); `denoise`
        is ComfyUI's (run the last N steps of a longer schedule)."""
        mu = calculate_shift(
            image_seq_len,
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        total, first = denoise_window(steps, denoise)
        sigmas = model_sigmas(config, total, mu, schedule, spacing)[first:]
        scheduler = sampler_scheduler(sampler, sigmas, device)
        timesteps = cast(torch.Tensor, scheduler.timesteps)
        begin = 0
        if strength is not None:
            begin = img2img_start(steps, strength) * int(scheduler.order)
            timesteps = timesteps[begin:]
        scheduler.set_begin_index(begin)
        return cls(scheduler, timesteps, model_time)

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

    def x0_estimate(self, index: int, noise_pred: Any, latents: Latents, /) -> torch.Tensor:
        """The finished latents this step's prediction points at: a flow model predicts
        `noise - x0`, so `x0 = x_t - sigma * prediction`, with `sigma` the level the model saw
        (`timesteps[index] / 1000` for every sampler here, Heun's half-steps included)."""
        sigma = self.timesteps[index] / self.scheduler.config.num_train_timesteps
        return flow_x0(cast(torch.Tensor, latents.value), sigma, cast(torch.Tensor, noise_pred))

    def scale_noise(self, image_latents: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """img2img's starting point: the encoded image noised to the first timestep."""
        t = self.timesteps[:1].repeat(image_latents.shape[0])
        return cast(torch.Tensor, self.scheduler.scale_noise(image_latents, t, noise))

    def renoised(self, index: int, clean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Inpainting's kept part after step `index`: `clean` noised to the next step's level
        (the scheduler's own `scale_noise` at its current step, as diffusers' inpaint does)."""
        t = self.timesteps[index + 1 : index + 2]
        return cast(torch.Tensor, self.scheduler.scale_noise(clean, t, noise))

    def noised(self, latents: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """`latents` noised to the first sigma this schedule visits, by the flow forward process
        `sigma * noise + (1 - sigma) * x` (for any sampler; not all of them have `scale_noise`)."""
        begin = int(self.scheduler.begin_index or 0)
        sigma = cast(torch.Tensor, self.scheduler.sigmas)[begin].to(latents.device, latents.dtype)
        return sigma * noise + (1.0 - sigma) * latents
