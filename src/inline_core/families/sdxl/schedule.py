"""One SDXL (or SD 1.x) request's private schedule: a discrete-time model's sigmas walked by the
shared sampler library (`diffusion/sigma/`), as ComfyUI's KSampler walks them.

The model's table is `DiscreteSampling` (its betas and prediction type from the scheduler
config); the sigmas are a named schedule's, the last `steps` of `steps / denoise` of them; the
start is seeded noise (plus the latents it starts from) scaled to the first sigma as KSampler
scales it; each model call sees `x / sqrt(sigma^2 + 1)` at the nearest training timestep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from inline_core.diffusion.flow.steps import denoise_window
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.prediction import Prediction, model_input
from inline_core.diffusion.sigma.sampling import DiscreteSampling, discrete_prediction
from inline_core.diffusion.sigma.schedules import schedule_sigmas
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.families.sdxl.refiner import switch_step


def discrete_sampling(
    config: Mapping[str, Any], prediction: str | None = None, zsnr: bool = False
) -> DiscreteSampling:
    """The model's noise table from a diffusers scheduler config (SD's scaled linear betas; its
    prediction type and `rescale_betas_zero_snr`), or with the request's own `prediction` (a
    ComfyUI ModelSamplingDiscrete's `sampling`) and `zsnr` in their place."""
    if prediction is None:
        prediction = str(config.get("prediction_type") or "epsilon")
        zsnr = bool(config.get("rescale_betas_zero_snr", False))
    return DiscreteSampling(
        discrete_prediction(prediction),
        beta_start=float(config.get("beta_start", 0.00085)),
        beta_end=float(config.get("beta_end", 0.012)),
        timesteps=int(config.get("num_train_timesteps", 1000)),
        zsnr=zsnr,
    )


class StagedStepper:
    """Two samplers, the second started afresh where the first stops: over one schedule split
    at a sigma (ComfyUI's two KSamplerAdvanced stages; diffusers' base then refiner pipeline),
    or a hires pass's own schedule after the first's (two KSamplers). The second stage's first
    call is its own sampler's first, with no history from the first's."""

    def __init__(self, first: SigmaStepper, second: SigmaStepper) -> None:
        self.stages = (first, second)
        self.call_sigmas = [*first.call_sigmas, *second.call_sigmas]
        self.switch_call = len(first.call_sigmas)  # the second stage's first model call
        self._calls = 0

    def advance(
        self, output: torch.Tensor, x: torch.Tensor | None = None, uncond: Any = None
    ) -> torch.Tensor:
        stage = self.stages[0 if self._calls < self.switch_call else 1]
        self._calls += 1
        return stage.advance(output, x, uncond)


class DiscreteSchedule:
    def __init__(
        self,
        sampling: DiscreteSampling,
        sigmas: list[float],
        stepper: SigmaStepper | StagedStepper,
        hires_sigmas: list[float] | None = None,
    ):
        self.sampling = sampling
        self.sigmas = sigmas
        self.stepper = stepper
        self.hires_sigmas = hires_sigmas  # the hires pass's schedule (None: no hires pass)
        calls = stepper.call_sigmas
        self.levels = calls  # each model call's sigma
        self.timesteps = [sampling.timestep(s) for s in calls]  # computed once: no syncs
        staged = stepper.switch_call if isinstance(stepper, StagedStepper) else None
        # The refiner's, or the hires pass's, first model call (None: none).
        self.refiner_from = None if hires_sigmas is not None else staged
        self.hires_from = None if hires_sigmas is None else staged

    @classmethod
    def create(
        cls,
        config: Mapping[str, Any],
        steps: int,
        *,
        sampler: str,
        schedule: str,
        prediction: str | None = None,
        zsnr: bool = False,
        denoise: float = 1.0,
        skip: int = 0,
        seed: int = 0,
        row: int = 0,
        refiner_switch: float | None = None,
        hires: tuple[int, float] | None = None,
    ) -> DiscreteSchedule:
        """`denoise` is ComfyUI's (the last `steps` of a longer schedule); `skip` drops the first
        steps of this one (img2img's strength, as diffusers counts it); `prediction` and
        `zsnr` replace the model's own (ComfyUI's ModelSamplingDiscrete); `refiner_switch`
        splits it between the base and the refiner (`refiner.switch_step`); `hires` (steps,
        denoise) adds a second pass on its own schedule, ComfyUI's second KSampler's."""
        sampling = discrete_sampling(config, prediction, zsnr)
        total, first = denoise_window(steps, denoise)
        sigmas = schedule_sigmas(schedule, sampling, total)[first + skip :]

        def stepper(window: list[float]) -> SigmaStepper:
            return SigmaStepper(
                sampler, sampling, window, None, RowNoise([row_generator(seed, row)])
            )

        if hires is not None:
            hires_total, hires_first = denoise_window(*hires)
            second = schedule_sigmas(schedule, sampling, hires_total)[hires_first:]
            return cls(sampling, sigmas, StagedStepper(stepper(sigmas), stepper(second)), second)
        if refiner_switch is None:
            return cls(sampling, sigmas, stepper(sigmas))
        timesteps = [sampling.timestep(s) for s in sigmas[:-1]]
        at = switch_step(timesteps, refiner_switch, len(sampling.sigmas))
        return cls(sampling, sigmas, StagedStepper(stepper(sigmas[: at + 1]), stepper(sigmas[at:])))

    @property
    def step_count(self) -> int:
        return len(self.levels)

    def start(self, noise: torch.Tensor, latents: torch.Tensor | None) -> torch.Tensor:
        """The first point: KSampler's `noise_scaling`; at the model's largest sigma (a full
        render) the noise is scaled by `sqrt(1 + sigma^2)`, else by sigma."""
        return self._start_at(self.sigmas[0], noise, latents)

    def hires_start(self, noise: torch.Tensor, latents: torch.Tensor) -> torch.Tensor:
        """The hires pass's first point: the second KSampler's `noise_scaling` of its latents."""
        if self.hires_sigmas is None:
            raise RuntimeError("this schedule has no hires pass")
        return self._start_at(self.hires_sigmas[0], noise, latents)

    def _start_at(
        self, sigma: float, noise: torch.Tensor, latents: torch.Tensor | None
    ) -> torch.Tensor:
        top = self.sampling.sigma_max
        base = torch.zeros_like(noise) if latents is None else latents.to(noise)
        if math.isclose(sigma, top, rel_tol=1e-5) or sigma > top:
            return base + noise * math.sqrt(1.0 + sigma**2)
        return self.sampling.noise_scaling(sigma, noise, base)

    def start_from_noise(self, noise: torch.Tensor) -> torch.Tensor:
        """Noise alone at the first sigma, at its full variance `1 + sigma^2` (diffusers'
        inpaint at full strength: the noise times `init_noise_sigma`, its leading-spacing
        Euler's `sqrt(1 + sigma^2)`, which is 1 in its VP schedulers' own space), whatever the
        first sigma is."""
        return noise * math.sqrt(1.0 + self.sigmas[0] ** 2)

    def model_input(self, index: int, x: torch.Tensor) -> torch.Tensor:
        return model_input(self.sampling, x, self.levels[index])

    def step(
        self, output: torch.Tensor, x: torch.Tensor, uncond: torch.Tensor | None = None
    ) -> torch.Tensor:
        """`uncond`: the unconditional output, which a CFG++ sampler steps along."""
        return self.stepper.advance(output.to(torch.float32), x.to(torch.float32), uncond)

    def x0(self, index: int, output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The clean latents model call `index`'s output points at (a preview's)."""
        return Prediction(self.sampling, x.to(torch.float32), self.levels[index], output).denoised
