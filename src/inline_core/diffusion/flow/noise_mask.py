"""A latent's noise mask, applied at every model call the way ComfyUI's samplers apply it
(`KSamplerX0Inpaint`), for a flow model that predicts `noise - x0`.

With `m` the mask at latent size (1 repaints, 0 keeps, gray blends), `L` the latents sampled from
and `n` the noise the render started with, at level `sigma`:

- the model sees `x_in = m * x + (1 - m) * (sigma * n + (1 - sigma) * L)`: the kept part noised
  to this level, so it always sees the original there;
- its finished estimate is `x0 = x_in - sigma * v`, and the kept part of it is replaced by `L`:
  `x0' = m * x0 + (1 - m) * L`;
- the sampler steps `x` (not `x_in`) towards `x0'`, i.e. with the prediction
  `v' = (x - x0') / sigma`, written so that `m = 1` gives `v` itself, bit for bit.

Every sampler here reads the model through that prediction, so each keeps ComfyUI's inpaint
arithmetic; at the last step the kept part is `L`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)

from inline_core.components.interfaces import Latents
from inline_core.diffusion.flow.schedule import FlowMatchSchedule


@dataclass(eq=False)
class NoiseMask:
    mask: torch.Tensor  # (1, 1, h, w) at latent size
    latents: torch.Tensor  # L: what the render samples from (zeros for an empty latent)
    noise: torch.Tensor  # n: the noise it started with

    @classmethod
    def at_latents(
        cls, mask: torch.Tensor, latents: torch.Tensor, noise: torch.Tensor
    ) -> NoiseMask:
        """`mask` (`(1, 1, H, W)` at any size) resized to the latents bilinearly, as ComfyUI
        resizes a noise mask."""
        size = tuple(int(n) for n in latents.shape[-2:])
        mask = mask.to(latents.device, torch.float32)
        if tuple(mask.shape[-2:]) != size:
            mask = F.interpolate(mask, size=size, mode="bilinear")
        return cls(mask.to(latents.dtype), latents, noise)

    def _sigma(self, schedule: FlowMatchSchedule, index: int) -> torch.Tensor:
        return schedule.sigma(index).to(self.latents.device, self.latents.dtype)

    def model_input(self, schedule: FlowMatchSchedule, index: int, latents: Latents) -> Latents:
        """What the model sees at step `index`: the kept part noised to its level."""
        sigma = self._sigma(schedule, index)
        x = cast(torch.Tensor, latents.value)
        kept = sigma * self.noise + (1.0 - sigma) * self.latents
        return Latents(self.mask * x + (1.0 - self.mask) * kept, latents.shape)

    def prediction(
        self,
        schedule: FlowMatchSchedule,
        index: int,
        latents: Latents,
        seen: Latents,
        pred: torch.Tensor,
    ) -> torch.Tensor:
        """The prediction to step `latents` with, from the model's `pred` at `seen`."""
        sigma, x, x_in = self._points(schedule, index, latents, seen, pred.dtype)
        m, kept = self.mask.to(pred.dtype), self.latents.to(pred.dtype)
        return m * pred + (x - m * x_in - (1.0 - m) * kept) / sigma

    def unconditional(
        self,
        schedule: FlowMatchSchedule,
        index: int,
        latents: Latents,
        seen: Latents,
        pred: torch.Tensor,
    ) -> torch.Tensor:
        """A CFG++ step's unconditional `pred` at `seen`, relative to `latents`: the same clean
        estimate, unmasked (ComfyUI reads it inside the masked model, before the blend)."""
        sigma, x, x_in = self._points(schedule, index, latents, seen, pred.dtype)
        return pred + (x - x_in) / sigma

    def _points(
        self,
        schedule: FlowMatchSchedule,
        index: int,
        latents: Latents,
        seen: Latents,
        dtype: torch.dtype,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step `index`'s sigma, the latents and what the model saw, in a prediction's dtype."""
        sigma = self._sigma(schedule, index).to(dtype)
        x = cast(torch.Tensor, latents.value).to(dtype)
        return sigma, x, cast(torch.Tensor, seen.value).to(dtype)
