"""One Wan request's private schedule: its sampler walking its sigmas, on the shared sigma library.

The model's own (the node's empty `sampler` and `schedule`) is diffusers' `WanPipeline`: the
scheduler config's UniPC on its own table; a named one is the library's under ComfyUI's name, on
Wan's flow table shifted by the config's `flow_shift` (or the request's shift), as
`diffusion/flow/unipc_model.py` says. The transformer takes the timestep as it is
(`sigma x 1000`; the model's own UniPC's truncated to an integer, as diffusers feeds it). A
two-expert pair switches at a model call (`switch_call`), not a step: a sampler may call the
model more than once a step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from inline_core.diffusion.flow.samplers import TRAIN_TIMESTEPS
from inline_core.diffusion.flow.schedule import FlowMatchSchedule
from inline_core.diffusion.flow.unipc_model import unipc_model_walk
from inline_core.diffusion.sigma.noise import RowNoise, row_generator
from inline_core.diffusion.sigma.stepper import call_sigmas
from inline_core.families.wan.descriptor import MODEL_OWN


def _as_is(timesteps: torch.Tensor) -> torch.Tensor:
    """Wan's transformer takes the scheduler's timestep, not a share of 1000."""
    return timesteps


def wan_schedule(
    config: Mapping[str, Any],
    steps: int,
    device: torch.device,
    *,
    sampler: str = MODEL_OWN,
    schedule: str = MODEL_OWN,
    seed: int = 0,
) -> FlowMatchSchedule:
    """`config`: the model's diffusers UniPC config, its `flow_shift` the request's own."""
    walk = unipc_model_walk(
        config,
        steps,
        device,
        None if sampler == MODEL_OWN else sampler,
        None if schedule == MODEL_OWN else schedule,
    )
    stepper = walk.stepper(RowNoise([row_generator(seed)]))
    levels = torch.tensor(stepper.call_sigmas, dtype=torch.float32)
    return FlowMatchSchedule(stepper, levels, walk.timesteps(stepper.call_sigmas, device), _as_is)


def boundary_call(timesteps: Sequence[float], boundary_ratio: float) -> int:
    """The first model call on the low-noise expert: the timesteps fall, and diffusers runs the
    high-noise expert while `t >= boundary_ratio x num_train_timesteps`."""
    boundary = boundary_ratio * TRAIN_TIMESTEPS
    return sum(1 for t in timesteps if t >= boundary)


def switch_call(schedule: FlowMatchSchedule, step: int) -> int:
    """The first model call of schedule step `step` (ComfyUI's two stages split there): the calls
    the sampler makes over the steps before it (the sigmas up to `step`, which is not the last,
    so the sampler's control flow over them is the whole walk's)."""
    stepper = schedule.stepper
    return len(call_sigmas(stepper.name, stepper.sampling, stepper.sigmas[: step + 1]))
