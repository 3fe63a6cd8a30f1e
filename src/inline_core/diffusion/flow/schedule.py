"""One request's private flow-matching schedule: sigmas, shift, sampler and img2img start.

Each request gets its own sampler state (steps advance per request, so requests at different
steps, with different samplers, can share a forward). The sigmas follow diffusers' flow
pipelines for `simple` (`samplers.py`) and the sigma library for every other schedule; `mu` comes
from the image token count for a dynamically shifted model; img2img starts at
`N - int(N * strength)`. The samplers are the sigma library's (`diffusion/sigma/`). The
timestep a transformer is fed is its family's (`model_time`), computed once from
every model call's sigma. The low-level `sample` node may pick another sampler and schedule and
ComfyUI's `denoise`; the defaults are the pipelines' own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import torch

from inline_core.components.interfaces import Latents
from inline_core.diffusion.flow.samplers import (
    TRAIN_TIMESTEPS,
    Spacing,
    flow_sampling,
    flow_spacing,
    model_sigmas,
)
from inline_core.diffusion.flow.steps import denoise_window, img2img_start
from inline_core.diffusion.libs import to_floats
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.diffusion.sigma.window import StepWindow
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, SAMPLERS

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
        self,
        stepper: SigmaStepper,
        levels: torch.Tensor,
        timesteps: torch.Tensor,
        model_time: ModelTime = diffusers_time,
    ) -> None:
        self.stepper = stepper
        self.levels = levels  # every model call's sigma (float32, on the host)
        self.timesteps = timesteps  # the same times 1000, on the device
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
        seed: int = 0,
        row: int = 0,
        mu: float | None = None,
        window: StepWindow | None = None,
        shift: ModelShift | None = None,
    ) -> FlowMatchSchedule:
        """`strength` is img2img as diffusers counts it (skip the first steps of N); `denoise`
        is ComfyUI's (run the last N steps of a longer schedule). `seed` and `row` seed the
        noise of an ancestral or SDE sampler (the request's own). `mu`: a dynamically shifted
        model's own shift for this image (None: the config's line over the token count).
        `shift`: the request's own (ComfyUI's ModelSampling* nodes), in place of the model's."""
        if sampler not in SAMPLERS + CFG_PP_SAMPLERS:
            raise ValueError(f"unknown sampler {sampler!r}; choose one of {SAMPLERS}")
        if shift is not None:
            config = shift.flow_config(config)
            mu = shift.mu if shift.mu is not None else mu
        mu = (
            mu
            if mu is not None
            else calculate_shift(
                image_seq_len,
                config.get("base_image_seq_len", 256),
                config.get("max_image_seq_len", 4096),
                config.get("base_shift", 0.5),
                config.get("max_shift", 1.15),
            )
        )
        total, first = denoise_window(steps, denoise)
        sigmas = model_sigmas(config, total, mu, schedule, spacing)[first:]
        if strength is not None:
            sigmas = sigmas[img2img_start(steps, strength) :]
        if window is not None:  # ComfyUI's KSamplerAdvanced: steps start..end of the schedule
            sigmas = window.cut(sigmas)
        noise = RowNoise([row_generator(seed, row)])
        stepper = SigmaStepper(sampler, flow_sampling(config, mu), sigmas, None, noise)
        levels = torch.tensor(stepper.call_sigmas, dtype=torch.float32)
        timesteps = (levels * TRAIN_TIMESTEPS).to(device)
        return cls(stepper, levels, timesteps, model_time)

    @property
    def step_count(self) -> int:
        return int(self.timesteps.shape[0])

    def sigma(self, index: int, /) -> torch.Tensor:
        """The level of model call `index`, as the model's timestep over 1000 (a device value,
        read without a sync)."""
        return self.timesteps[index] / TRAIN_TIMESTEPS

    def model_timestep(self, index: int, /) -> torch.Tensor:
        return self.model_timesteps[index : index + 1]

    def step(self, index: int, noise_pred: Any, latents: Latents, /, uncond: Any = None) -> Latents:
        """`uncond`: the step's unconditional prediction, which a CFG++ sampler steps along."""
        pred = cast(torch.Tensor, noise_pred).to(torch.float32)
        unguided = None if uncond is None else cast(torch.Tensor, uncond).to(torch.float32)
        out = self.stepper.advance(pred, cast(torch.Tensor, latents.value), unguided)
        return Latents(out, latents.shape)

    def x0_estimate(self, index: int, noise_pred: Any, latents: Latents, /) -> torch.Tensor:
        """The finished latents this step's prediction points at: a flow model predicts
        `noise - x0`, so `x0 = x_t - sigma * prediction`, with `sigma` the level the model saw."""
        latent = cast(torch.Tensor, latents.value)
        return flow_x0(latent, self.sigma(index), cast(torch.Tensor, noise_pred))

    def _noised_to(self, index: int, clean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        # diffusers' `scale_noise`: the sigma in the sample's dtype, then the flow forward process.
        sigma = self.levels[index].to(clean.device, clean.dtype)
        return sigma * noise + (1.0 - sigma) * clean

    def scale_noise(self, image_latents: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """img2img's starting point: the encoded image noised to the first level."""
        return self._noised_to(0, image_latents, noise)

    def renoised(self, index: int, clean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Inpainting's kept part after model call `index`: `clean` noised to the next call's
        level (as diffusers' inpaint does with its scheduler's `scale_noise`)."""
        return self._noised_to(index + 1, clean, noise)

    def unnoised(self, latents: torch.Tensor) -> torch.Tensor:
        """`latents` at the first sigma without added noise (ComfyUI's `noise_scaling` with zero
        noise, as KSamplerAdvanced's add_noise disable starts): `(1 - sigma) * x`."""
        return (1.0 - self.stepper.sigmas[0]) * latents

    def handed_on(self, latents: torch.Tensor) -> torch.Tensor:
        """The latents a render stopped above sigma 0 hands on (its leftover noise kept), as
        ComfyUI's `inverse_noise_scaling` returns them: `x / (1 - sigma)`, which `unnoised`
        takes back at the next window's start."""
        last = self.stepper.sigmas[-1]
        return latents if last == 0 else latents / (1.0 - last)

    def noised(self, latents: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """`latents` noised to the first sigma this schedule visits, by the flow forward process
        `sigma * noise + (1 - sigma) * x` (for any sampler)."""
        return self._noised_to(0, latents, noise)
