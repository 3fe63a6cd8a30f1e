"""What a flow model whose own scheduler is diffusers' `UniPCMultistepScheduler` (Wan, SkyReels-V2)
walks for a node's `sampler` and `schedule`, on the shared sigma library.

Empty (None), each is the model's own: the scheduler config's UniPC over the table
`UniPCMultistepScheduler` makes, fed its integer timesteps, so a default render is diffusers' bit
for bit. A named sampler or schedule is the library's under ComfyUI's name, on the flow table
shifted by the config's `flow_shift`; `simple` is the flow pipelines' own spacing (`samplers.py`).
The model's own UniPC is fed its sigmas x 1000 truncated to integers, as diffusers feeds them; a
named sampler (ComfyUI's `uni_pc` too) its sigmas x 1000, as ComfyUI feeds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import torch

from inline_core.diffusion.flow.samplers import (
    TRAIN_TIMESTEPS,
    model_sigmas,
    numpy_flow_spacing,
    unipc_of_config,
    unipc_timesteps,
)
from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma.noise import NoiseSource
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.stepper import Sampler, SigmaStepper, call_sigmas


@dataclass(frozen=True)
class UniPCModelWalk:
    algorithm: Sampler
    sampling: FlowSampling
    sigmas: list[float]
    unipc: bool  # the model's own UniPC, fed as diffusers feeds it: integer timesteps
    own_timesteps: torch.Tensor | None  # the model's own table's, where it walks that table

    def call_sigmas(self) -> list[float]:
        """The sigma of each model call the sampler makes over the sigmas."""
        return call_sigmas(self.algorithm, self.sampling, self.sigmas)

    def stepper(self, noise: NoiseSource) -> SigmaStepper:
        """A sampler over the sigmas, starting at its first call's point."""
        return SigmaStepper(self.algorithm, self.sampling, self.sigmas, None, noise)

    def timesteps(self, call_sigmas: Sequence[float], device: torch.device) -> torch.Tensor:
        """The timestep the model is fed at each call."""
        if self.own_timesteps is not None and self.unipc:  # diffusers' own integer timesteps
            return self.own_timesteps
        if self.unipc:
            return unipc_timesteps(list(call_sigmas), device)
        return (torch.tensor(list(call_sigmas), dtype=torch.float32) * TRAIN_TIMESTEPS).to(device)


def unipc_model_walk(
    config: Mapping[str, Any],
    steps: int,
    device: torch.device,
    sampler: str | None = None,
    schedule: str | None = None,
    *,
    in_place: bool = False,
) -> UniPCModelWalk:
    """`config`: the model's diffusers UniPC config, its `flow_shift` the request's own;
    `sampler`, `schedule`: ComfyUI's names, None the model's own. `in_place`: the model's own
    UniPC as a pipeline that writes each step into the latents it stepped runs it (diffusers'
    diffusion-forcing ones: `UniPC.first_correction_in_place`)."""
    shift = float(config["flow_shift"])
    if sampler is None:
        own = replace(unipc_of_config(config), first_correction_in_place=in_place)
        algorithm: Sampler = own.algorithm
    else:
        algorithm = sampler
    own_timesteps: torch.Tensor | None = None
    if schedule is None:
        table: Any = diffusers().UniPCMultistepScheduler.from_config(dict(config))
        table.set_timesteps(steps, device=device)
        sigmas = to_floats(cast(torch.Tensor, table.sigmas))
        own_timesteps = cast(torch.Tensor, table.timesteps)
    else:
        flow = {"shift": shift, "num_train_timesteps": TRAIN_TIMESTEPS}
        sigmas = model_sigmas(flow, steps, 0.0, schedule, numpy_flow_spacing)
    return UniPCModelWalk(algorithm, FlowSampling(shift), sigmas, sampler is None, own_timesteps)
