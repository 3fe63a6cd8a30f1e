"""An independent reference for ComfyUI's `euler_ancestral` on a flow model
(`sample_euler_ancestral_RF`, eta 1), written out here rather than taken from the sigma library,
as a diffusers flow scheduler that LTX-2's pipelines step in place of their Euler.

Its noise is the node's sampler noise: the request's own stream (`row_generator(seed, row)`),
row 0 the video's and row 1 the soundtrack's (the copy `LTX2Pipeline` makes of its scheduler for
the audio stream), drawn in the packed token shape; `LTX2ImageToVideoPipeline` steps the frames
after the first unpacked, which see that draw's share."""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

from inline_core.diffusion.libs import diffusers
from inline_core.diffusion.sigma.noise import row_generator

FlowEuler: Any = diffusers().FlowMatchEulerDiscreteScheduler


class EulerAncestralFlow(FlowEuler):  # type: ignore[misc]
    seed = 0
    row = 0
    generator: torch.Generator | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> EulerAncestralFlow:
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        twin.__dict__.update(copy.deepcopy(self.__dict__, memo))
        twin.row = self.row + 1  # LTX2Pipeline's audio scheduler
        return twin

    def noise(self, sample: torch.Tensor) -> torch.Tensor:
        if self.generator is None:
            self.generator = row_generator(self.seed, self.row)
        if sample.ndim == 3:  # packed tokens
            return torch.randn(tuple(sample.shape), generator=self.generator)
        b, c, f, h, w = sample.shape  # the frames after the first, unpacked
        packed = torch.randn((b, (f + 1) * h * w, c), generator=self.generator)
        return packed.transpose(1, 2).reshape(b, c, f + 1, h, w)[:, :, 1:]

    def step(
        self, model_output: torch.Tensor, timestep: Any, sample: torch.Tensor, **_: Any
    ) -> tuple[torch.Tensor]:
        if self.step_index is None:
            self._init_step_index(timestep)
        index: int = self.__dict__["_step_index"]
        sigma, sigma_next = float(self.sigmas[index]), float(self.sigmas[index + 1])
        x = sample.float()
        denoised = x - sigma * model_output.float()
        if sigma_next == 0:
            out = denoised
        else:
            down = sigma_next * sigma_next / sigma  # eta 1
            alpha_next, alpha_down = 1 - sigma_next, 1 - down
            renoise = math.sqrt(sigma_next**2 - down**2 * alpha_next**2 / alpha_down**2)
            ratio = down / sigma
            out = ratio * x + (1 - ratio) * denoised
            out = (alpha_next / alpha_down) * out + self.noise(sample) * renoise
        self._step_index = index + 1
        return (out.to(sample.dtype),)


def euler_ancestral(config: Any, seed: int) -> Any:
    """The reference over `config` unshifted (the sigmas stepped as given), the request's seed."""
    scheduler = EulerAncestralFlow.from_config(
        config, use_dynamic_shifting=False, shift_terminal=None
    )
    scheduler.seed = seed
    return scheduler
