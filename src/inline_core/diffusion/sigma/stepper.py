"""One request's sampler, one model call at a time: the step protocol runs one forward per step
for many requests at once, so a sampler cannot call its model; it says where it wants the next
call (`call`: the point and its sigma) and takes the output (`advance`).

The sigma of every call is known before the first (a dry run on a one-element tensor follows the
sampler's control flow, which depends on the sigmas only), so a family computes its timesteps,
its step count and its CFG truncation once, with no device sync.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inline_core.diffusion.sigma.algorithms.registry import ALGORITHMS
from inline_core.diffusion.sigma.algorithms.walk import Algorithm, Call, Run, Walk
from inline_core.diffusion.sigma.names import SIGMA_SAMPLERS
from inline_core.diffusion.sigma.noise import NoiseSource, NoNoise
from inline_core.diffusion.sigma.prediction import Prediction
from inline_core.diffusion.sigma.sampling import ModelSampling


def algorithm(name: str) -> Algorithm:
    found = ALGORITHMS.get(name)
    if found is None:
        raise ValueError(f"unknown sampler {name!r}; choose one of {SIGMA_SAMPLERS}")
    return found


def call_sigmas(name: str, sampling: ModelSampling, sigmas: Sequence[float]) -> list[float]:
    """The sigma of each model call `name` makes over `sigmas`."""
    run = algorithm(name)(Walk(sampling, NoNoise()), torch.zeros(1), list(sigmas))
    seen: list[float] = []
    try:
        x, sigma = next(run)
        while True:
            seen.append(sigma)
            x, sigma = run.send(Prediction(sampling, x, sigma, torch.zeros(1)))
    except StopIteration:
        return seen


class SigmaStepper:
    def __init__(
        self,
        name: str,
        sampling: ModelSampling,
        sigmas: Sequence[float],
        x: torch.Tensor,
        noise: NoiseSource,
    ) -> None:
        self.sampling = sampling
        self.sigmas = list(sigmas)
        self.call_sigmas = call_sigmas(name, sampling, self.sigmas)
        self._run: Run = algorithm(name)(Walk(sampling, noise), x.to(torch.float32), self.sigmas)
        self._pending: Call | None = None
        self.result: torch.Tensor | None = None
        try:
            self._pending = next(self._run)
        except StopIteration as stop:
            self.result = stop.value

    @property
    def step_count(self) -> int:
        return len(self.call_sigmas)

    @property
    def call(self) -> Call:
        """The point and sigma of the next model call."""
        if self._pending is None:
            raise RuntimeError("the sampler has finished")
        return self._pending

    def advance(self, output: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """Take the model's output at the pending call (made at `x`, if the caller replaced the
        point) and return the next call's point, or the result after the last call."""
        point, sigma = self.call
        seen = point if x is None else x.to(torch.float32)
        try:
            self._pending = self._run.send(Prediction(self.sampling, seen, sigma, output))
            return self._pending[0]
        except StopIteration as stop:
            self._pending = None
            self.result = stop.value
            return stop.value

    def denoised(self, output: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The clean latent the output at the pending call points at (a preview's)."""
        point, sigma = self.call
        return Prediction(self.sampling, point if x is None else x, sigma, output).denoised
