"""A model's output at `(x, sigma)` read as k-diffusion reads it: the clean latent it points at
(`denoised`) and the ODE derivative `(x - denoised) / sigma`. For epsilon and flow models the
derivative is the output itself (exactly, not through a subtraction), so an Euler step on a flow
model is diffusers' `x + dt * v` bit for bit.

A CFG++ sampler (`_cfg_pp`) also reads the unconditional output (`uncond`), which the family's
step hands on beside the guided one; one that gets none is refused, never run as plain CFG."""

from __future__ import annotations

from functools import cached_property

import torch

from inline_core.diffusion.sigma.sampling import ModelSampling


class MissingUncond(ValueError):
    """A CFG++ sampler was handed no unconditional output."""


class Prediction:
    def __init__(
        self,
        sampling: ModelSampling,
        x: torch.Tensor,
        sigma: float,
        output: torch.Tensor,
        uncond: torch.Tensor | None = None,
    ) -> None:
        self.sampling, self.x, self.sigma = sampling, x, sigma
        self.output = output.to(torch.float32)
        self.uncond = None if uncond is None else uncond.to(torch.float32)

    def _clean(self, output: torch.Tensor) -> torch.Tensor:
        if self.sampling.prediction == "v":
            s2 = self.sigma**2 + 1.0
            return self.x * (1.0 / s2) - output * (self.sigma / s2**0.5)
        return self.x - output * self.sigma

    @cached_property
    def denoised(self) -> torch.Tensor:
        return self._clean(self.output)

    @cached_property
    def uncond_denoised(self) -> torch.Tensor:
        """The clean latent the unconditional output points at (CFG++ steps along it)."""
        if self.uncond is None:
            raise MissingUncond(
                "a CFG++ sampler needs the unconditional prediction beside the guided one, "
                "and this model's step hands on none"
            )
        return self._clean(self.uncond)

    @cached_property
    def derivative(self) -> torch.Tensor:
        if self.sampling.prediction == "v":
            return (self.x - self.denoised) / self.sigma
        return self.output


def model_input(sampling: ModelSampling, x: torch.Tensor, sigma: float) -> torch.Tensor:
    """What the model is fed at `(x, sigma)`: `x` for a flow model, `x / sqrt(sigma^2 + 1)` for
    a discrete-time one (ComfyUI's `calculate_input`)."""
    if sampling.flow:
        return x
    return x / (sigma**2 + 1.0) ** 0.5
