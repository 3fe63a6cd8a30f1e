"""A model's noise levels as ComfyUI's `model_sampling` holds them: a table of sigmas, the
timestep each sigma maps to, and the prediction type (what the model's output means).

- `DiscreteSampling`: an epsilon- or v-prediction model trained on 1000 discrete timesteps
  (SD/SDXL): `x = x0 + sigma * noise` and the model sees `x / sqrt(sigma^2 + 1)`.
- `FlowSampling`: a flow-matching model (ComfyUI's CONST): `x = (1 - sigma) * x0 + sigma * noise`,
  the model sees `x` and predicts the velocity `noise - x0`. Its shift is a sigma schedule: the
  table is the shifted one (SD3's `shift * t / (1 + (shift - 1) * t)`, or FLUX's exponential
  `mu`), so every schedule on it is shifted.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Literal

import torch

Prediction = Literal["eps", "v", "flow"]

# A discrete-time model's prediction type under diffusers' names (a scheduler config's
# `prediction_type`) and ComfyUI's (ModelSamplingDiscrete's `sampling`).
DISCRETE_PREDICTIONS: dict[str, Literal["eps", "v"]] = {
    "epsilon": "eps",
    "eps": "eps",
    "v_prediction": "v",
}


def discrete_prediction(name: str) -> Literal["eps", "v"]:
    """The library's prediction type for `name`; one it does not run is a ValueError."""
    found = DISCRETE_PREDICTIONS.get(name)
    if found is None:
        raise ValueError(
            f"prediction type {name!r} is not run here; choose one of "
            f"{', '.join(DISCRETE_PREDICTIONS)}"
        )
    return found


class ModelSampling(ABC):
    prediction: Prediction
    sigmas: torch.Tensor  # ascending float32 table, one sigma per training timestep

    @property
    def sigma_min(self) -> float:
        return float(self.sigmas[0])

    @property
    def sigma_max(self) -> float:
        return float(self.sigmas[-1])

    @property
    def flow(self) -> bool:
        return self.prediction == "flow"

    @abstractmethod
    def timestep(self, sigma: float) -> float: ...

    @abstractmethod
    def sigma(self, timestep: float) -> float: ...

    @abstractmethod
    def percent_to_sigma(self, percent: float) -> float: ...

    def half_log_snr(self, sigma: float) -> float:
        """`log(alpha / sigma)`: `-log sigma`, or `log((1 - sigma) / sigma)` for a flow model."""
        if sigma <= 0:
            return math.inf
        if self.flow:
            return math.log((1.0 - sigma) / sigma) if sigma < 1 else -math.inf
        return -math.log(sigma)

    def sigma_at_half_log_snr(self, lam: float) -> float:
        if self.flow:
            return 1.0 / (1.0 + math.exp(lam))
        return math.exp(-lam)

    def noise_scaling(
        self, sigma: float, noise: torch.Tensor, latent: torch.Tensor
    ) -> torch.Tensor:
        """`latent` noised to `sigma` (ComfyUI's `noise_scaling`, not at maximum denoise)."""
        if self.flow:
            return sigma * noise + (1.0 - sigma) * latent
        return latent + noise * sigma

    def first_sigma_for_snr(self, sigmas: list[float]) -> list[float]:
        """A flow schedule starting at sigma 1 has no finite log-SNR there: ComfyUI starts such a
        sampler a hair below it (`offset_first_sigma_for_snr`)."""
        if self.flow and len(sigmas) > 1 and sigmas[0] >= 1:
            return [self.percent_to_sigma(1e-4), *sigmas[1:]]
        return sigmas


def _scaled_linear_betas(start: float, end: float, count: int) -> torch.Tensor:
    return torch.linspace(start**0.5, end**0.5, count, dtype=torch.float64) ** 2


# ComfyUI's last alpha-bar of a zero-terminal-SNR table: not 0, so its sigma stays finite.
ZSNR_LAST_ALPHA_BAR = 4.8973451890853435e-08


def zero_terminal_snr(sigmas: torch.Tensor) -> torch.Tensor:
    """ComfyUI's `rescale_zero_terminal_snr_sigmas` (Lin et al., arXiv 2305.08891): sqrt(alpha
    bar) shifted so the last timestep holds no signal and scaled so the first keeps its own."""
    root = (1 / (sigmas * sigmas + 1)).sqrt()
    first, last = root[0].clone(), root[-1].clone()
    root = (root - last) * (first / (first - last))
    alpha_bar = root**2
    alpha_bar[-1] = ZSNR_LAST_ALPHA_BAR
    return ((1 - alpha_bar) / alpha_bar) ** 0.5


class DiscreteSampling(ModelSampling):
    """ComfyUI's `ModelSamplingDiscrete` (its "linear" beta schedule: SD's scaled linear), with
    `zsnr` its zero-terminal-SNR rescale (v-prediction models trained so)."""

    def __init__(
        self,
        prediction: Literal["eps", "v"] = "eps",
        *,
        beta_start: float = 0.00085,
        beta_end: float = 0.012,
        timesteps: int = 1000,
        zsnr: bool = False,
    ) -> None:
        self.prediction = prediction
        self.zsnr = zsnr
        alphas_cumprod = torch.cumprod(
            1.0 - _scaled_linear_betas(beta_start, beta_end, timesteps), 0
        )
        sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5  # float64, as ComfyUI's
        self.sigmas = (zero_terminal_snr(sigmas) if zsnr else sigmas).float()
        self.log_sigmas = self.sigmas.log()

    def timestep(self, sigma: float) -> float:
        """The nearest training timestep in log sigma (ComfyUI's argmin)."""
        dists = (math.log(sigma) - self.log_sigmas).abs()
        return float(torch.argmin(dists))

    def sigma(self, timestep: float) -> float:
        t = min(max(timestep, 0.0), len(self.sigmas) - 1.0)
        low, high = math.floor(t), math.ceil(t)
        w = t - low
        log_sigma = (1 - w) * float(self.log_sigmas[low]) + w * float(self.log_sigmas[high])
        return math.exp(log_sigma)

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 999999999.9
        if percent >= 1.0:
            return 0.0
        return self.sigma((1.0 - percent) * 999.0)


class FlowSampling(ModelSampling):
    """ComfyUI's `ModelSamplingDiscreteFlow` (`shift`, SD3/AuraFlow/Z-Image/Wan) or, with `mu`,
    `ModelSamplingFlux` (the exponential time shift, a table of 10000)."""

    def __init__(self, shift: float = 1.0, *, mu: float | None = None) -> None:
        self.prediction = "flow"
        self.shift, self.mu = shift, mu
        count = 1000 if mu is None else 10000
        self.multiplier = 1000.0 if mu is None else 1.0
        # `_shifted` over the table in float64 at once: the same IEEE operations in the same order
        # (one `exp`, on the host), so the same sigmas as element by element, a thousand times
        # sooner (a 10000 table made per request).
        t = (torch.arange(1, count + 1, 1) / count).to(torch.float64)
        if mu is not None:
            e = math.exp(mu)
            table = e / (e + (1 / t - 1))
        elif shift == 1.0:
            table = t
        else:
            table = shift * t / (1 + (shift - 1) * t)
        self.sigmas = table.to(torch.float32)

    def _shifted(self, t: float) -> float:
        if self.mu is not None:
            if t <= 0:
                return 0.0
            return math.exp(self.mu) / (math.exp(self.mu) + (1 / t - 1))
        if self.shift == 1.0:
            return t
        return self.shift * t / (1 + (self.shift - 1) * t)

    def timestep(self, sigma: float) -> float:
        return sigma * self.multiplier

    def sigma(self, timestep: float) -> float:
        return self._shifted(timestep / self.multiplier)

    def percent_to_sigma(self, percent: float) -> float:
        if percent <= 0.0:
            return 1.0
        if percent >= 1.0:
            return 0.0
        return self._shifted(1.0 - percent)
