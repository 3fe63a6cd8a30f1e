"""A model's output at `(x, sigma)` read as k-diffusion reads it: the clean latent it points at
(`denoised`) and the ODE derivative `(x - denoised) / sigma`. For epsilon and flow models the
derivative is the output itself (exactly, not through a subtraction), so an Euler step on a flow
model is diffusers' `x + dt * v` bit for bit."""

from __future__ import annotations

from functools import cached_property

import torch

from inline_core.diffusion.sigma.sampling import ModelSampling


class Prediction:
    def __init__(
        self, sampling: ModelSampling, x: torch.Tensor, sigma: float, output: torch.Tensor
    ) -> None:
        self.sampling, self.x, self.sigma = sampling, x, sigma
        self.output = output.to(torch.float32)

    @cached_property
    def denoised(self) -> torch.Tensor:
        if self.sampling.prediction == "v":
            s2 = self.sigma**2 + 1.0
            return self.x * (1.0 / s2) - self.output * (self.sigma / s2**0.5)
        return self.x - self.output * self.sigma

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
