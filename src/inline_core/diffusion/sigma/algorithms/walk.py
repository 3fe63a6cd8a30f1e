"""What a sampler walks with: the model's sampling (prediction type, log-SNR) and its noise."""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass

import torch

from inline_core.diffusion.sigma.noise import NoiseSource
from inline_core.diffusion.sigma.prediction import Prediction
from inline_core.diffusion.sigma.sampling import ModelSampling

Call = tuple[torch.Tensor, float]
Run = Generator[Call, Prediction, torch.Tensor]


@dataclass(frozen=True)
class Walk:
    sampling: ModelSampling
    noise: NoiseSource


Algorithm = Callable[[Walk, torch.Tensor, list[float]], Run]


def ancestral_step(sigma_from: float, sigma_to: float, eta: float = 1.0) -> tuple[float, float]:
    """(sigma_down, sigma_up): where an ancestral step goes deterministically and how much noise
    it adds back (k-diffusion's `get_ancestral_step`)."""
    if not eta:
        return sigma_to, 0.0
    up = min(sigma_to, eta * (sigma_to**2 * (sigma_from**2 - sigma_to**2) / sigma_from**2) ** 0.5)
    return (sigma_to**2 - up**2) ** 0.5, up


@dataclass(frozen=True)
class FlowAncestral:
    """A rectified-flow ancestral step (ComfyUI's `_RF` samplers): the deterministic target
    `down`, then `x * (alpha_next / alpha_down) + noise * renoise`."""

    down: float
    scale: float  # alpha_next / alpha_down
    renoise: float

    @classmethod
    def of(cls, sigma: float, sigma_next: float, eta: float = 1.0) -> FlowAncestral:
        down = sigma_next * (1 + (sigma_next / sigma - 1) * eta)
        alpha_next, alpha_down = 1 - sigma_next, 1 - down
        renoise = (sigma_next**2 - down**2 * alpha_next**2 / alpha_down**2) ** 0.5
        return cls(down, alpha_next / alpha_down, renoise)


def neg_log(sigma: float) -> float:
    return -math.log(sigma)
