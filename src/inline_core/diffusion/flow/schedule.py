"""One request's private flow-matching schedule: sigmas, shift, sampler and img2img start.

Each request gets its own sampler state (steps advance per request, so requests at different
steps, with different samplers, can share a forward). The sigmas follow diffusers' flow
pipelines for `simple` (`samplers.py`) and the sigma library for every other schedule; `mu` comes
from the image token count for a dynamically shifted model; img2img starts at
`N - int(N * strength)`. The samplers are the sigma library's (`diffusion/sigma/`). The
timestep a transformer is fed is its family's (`model_time`), computed once from
every model call's sigma. The low-level `sample` node may pick another sampler and schedule and
ComfyUI's `denoise`; the defaults are the pipelines' own. The sigmas and the model sampling
depend on the settings alone (`SchedulePlan`), so they are worked out once per settings and each
request's schedule gets its own copies of them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch

from inline_core.components.interfaces import Latents
from inline_core.diffusion.flow.samplers import (
    PURE_SPACINGS,
    TRAIN_TIMESTEPS,
    Spacing,
    flow_sampling,
    flow_spacing,
    model_sigmas,
)
from inline_core.diffusion.flow.steps import denoise_window, img2img_start
from inline_core.diffusion.libs import to_floats
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.diffusion.sigma.window import StepWindow
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, SAMPLERS
from inline_core.kept import Kept

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


# A schedule's sigmas and model sampling depend on its settings alone (not on the seed, the
# sampler or the prompt): a render at settings seen before reads them back instead of working
# them out again. Kept ones are never handed out: each schedule gets its own copies.
PLANS: Kept[Hashable, tuple[tuple[float, ...], FlowSampling]] = Kept(64)


@dataclass(frozen=True)
class SchedulePlan:
    """What a schedule's sigmas and model sampling depend on (`FlowMatchSchedule.create` says
    what each is): its settings alone, not the seed, the sampler or the prompt."""

    config: Mapping[str, Any]
    steps: int
    image_seq_len: int
    strength: float | None
    schedule: str
    denoise: float
    spacing: Spacing
    mu: float | None
    window: StepWindow | None
    shift: ModelShift | None

    def made(self) -> tuple[list[float], FlowSampling]:
        """The sigmas the sampler walks and the model's sampling, the request's own copies;
        worked out once per settings where the spacing is a pure one (a caller's own, e.g. a
        closure over given sigmas, is run each time)."""
        if self.spacing not in PURE_SPACINGS:
            sigmas, sampling = self.worked_out_afresh()
            return list(sigmas), sampling
        key = (
            json.dumps(self.config, sort_keys=True, default=repr),
            self.steps,
            self.image_seq_len,
            self.strength,
            self.schedule,
            self.denoise,
            self.spacing,
            self.mu,
            self.window,
            self.shift,
        )
        sigmas, sampling = PLANS.get(key, self.worked_out_afresh)
        return list(sigmas), _own_sampling(sampling)

    def worked_out_afresh(self) -> tuple[tuple[float, ...], FlowSampling]:
        config, mu = self.config, self.mu
        if self.shift is not None:
            config = self.shift.flow_config(config)
            mu = self.shift.mu if self.shift.mu is not None else mu
        mu = (
            mu
            if mu is not None
            else calculate_shift(
                self.image_seq_len,
                config.get("base_image_seq_len", 256),
                config.get("max_image_seq_len", 4096),
                config.get("base_shift", 0.5),
                config.get("max_shift", 1.15),
            )
        )
        total, first = denoise_window(self.steps, self.denoise)
        sigmas = model_sigmas(config, total, mu, self.schedule, self.spacing)[first:]
        if self.strength is not None:
            sigmas = sigmas[img2img_start(self.steps, self.strength) :]
        if self.window is not None:  # ComfyUI's KSamplerAdvanced: steps start..end of the schedule
            sigmas = self.window.cut(sigmas)
        return tuple(sigmas), flow_sampling(config, mu)


def _own_sampling(kept: FlowSampling) -> FlowSampling:
    """A copy of a kept model sampling that shares nothing a render could change in place."""
    own = copy.copy(kept)
    own.sigmas = kept.sigmas.clone()
    return own


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
        plan = SchedulePlan(
            config, steps, image_seq_len, strength, schedule, denoise, spacing, mu, window, shift
        )
        sigmas, sampling = plan.made()
        noise = RowNoise([row_generator(seed, row)])
        stepper = SigmaStepper(sampler, sampling, sigmas, None, noise)
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
