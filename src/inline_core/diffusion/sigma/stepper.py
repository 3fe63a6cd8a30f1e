"""One request's sampler, one model call at a time: the step protocol runs one forward per step
for many requests at once, so a sampler cannot call its model; it says where it wants the next
call (`call`: the point and its sigma) and takes the output (`advance`).

The sigma of every call is known before the first (a dry run on a one-element tensor follows the
sampler's control flow, which depends on the sigmas only), so a family computes its timesteps,
its step count and its CFG truncation once, with no device sync.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch

from inline_core.diffusion.sigma.algorithms.registry import ALGORITHMS
from inline_core.diffusion.sigma.algorithms.walk import Algorithm, Call, Run, Walk
from inline_core.diffusion.sigma.noise import NoiseSource, NoNoise
from inline_core.diffusion.sigma.prediction import Prediction
from inline_core.diffusion.sigma.sampling import ModelSampling
from inline_core.graph.sampler_names import SIGMA_SAMPLERS

# A sampler by its ComfyUI name, or an algorithm configured otherwise (a family's own UniPC).
Sampler = str | Algorithm


def algorithm(name: Sampler) -> Algorithm:
    if not isinstance(name, str):
        return name
    found = ALGORITHMS.get(name)
    if found is None:
        raise ValueError(f"unknown sampler {name!r}; choose one of {SIGMA_SAMPLERS}")
    return found


def call_sigmas(name: Sampler, sampling: ModelSampling, sigmas: Sequence[float]) -> list[float]:
    """The sigma of each model call `name` makes over `sigmas`."""
    run = algorithm(name)(Walk(sampling, NoNoise()), torch.zeros(1), list(sigmas))
    seen: list[float] = []
    try:
        x, sigma = next(run)
        while True:
            seen.append(sigma)
            x, sigma = run.send(Prediction(sampling, x, sigma, torch.zeros(1), torch.zeros(1)))
    except StopIteration:
        return seen


class SigmaStepper:
    """Starts at `x`, or (without it) at the point its first `advance` is given."""

    def __init__(
        self,
        name: Sampler,
        sampling: ModelSampling,
        sigmas: Sequence[float],
        x: torch.Tensor | None,
        noise: NoiseSource,
    ) -> None:
        self.name, self.sampling, self.noise = name, sampling, noise
        self.sigmas = list(sigmas)
        self.call_sigmas = call_sigmas(name, sampling, self.sigmas)
        self._run: Run | None = None
        self._pending: Call | None = None
        self.result: torch.Tensor | None = None
        if x is not None:
            self._start(x)

    def _start(self, x: torch.Tensor) -> None:
        walk = Walk(self.sampling, self.noise)
        self._run = algorithm(self.name)(walk, x.to(torch.float32), self.sigmas)
        try:
            self._pending = next(self._run)
        except StopIteration as stop:
            self.result = stop.value

    @property
    def started(self) -> bool:
        """Whether it holds its starting point (given at construction or at its first call)."""
        return self._run is not None

    @property
    def step_count(self) -> int:
        return len(self.call_sigmas)

    @property
    def call(self) -> Call:
        """The point and sigma of the next model call."""
        if self._pending is None:
            raise RuntimeError("the sampler has finished")
        return self._pending

    def advance(
        self,
        output: torch.Tensor,
        x: torch.Tensor | None = None,
        uncond: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Take the model's output at the pending call (made at `x`, if the caller replaced the
        point; `uncond`: the unconditional output, which a CFG++ sampler steps along) and return
        the next call's point, or the result after the last call."""
        if self._run is None:
            if x is None:
                raise RuntimeError("a sampler started without a point needs one")
            self._start(x)
        point, sigma = self.call
        seen = point if x is None else x.to(torch.float32)
        try:
            self._pending = cast(Run, self._run).send(
                Prediction(self.sampling, seen, sigma, output, uncond)
            )
            return self._pending[0]
        except StopIteration as stop:
            self._pending = None
            self.result = stop.value
            return stop.value

    def denoised(self, output: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The clean latent the output at the pending call points at (a preview's)."""
        point, sigma = self.call
        return Prediction(self.sampling, point if x is None else x, sigma, output).denoised
