"""A flow family's sigmas and samplers: its config's shift as a sigma table, the schedules and
samplers of the sigma library on it, and UniPC's integer timesteps as diffusers feeds them.

`simple` is the flow pipelines' own spacing, `linspace(1, 1/N, N)` shifted by diffusers'
`FlowMatchEulerDiscreteScheduler` exactly as their pipelines compute it (so a family's default
render is its pipeline's, bit for bit); it is ComfyUI's `simple` where N divides the table's 1000
entries, and within one entry of it otherwise. Every other schedule is the library's, on the
shifted table (`diffusion/sigma/schedules.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np
import torch

from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma.algorithms.unipc import UniPC
from inline_core.diffusion.sigma.sampling import FlowSampling
from inline_core.diffusion.sigma.schedules import schedule_sigmas
from inline_core.errors import InvalidRequest
from inline_core.graph.sampler_names import SAMPLERS, SCHEDULES
from inline_core.kept import Kept

__all__ = ["SAMPLERS", "SCHEDULES"]

TRAIN_TIMESTEPS = 1000


Spacing = Callable[[int], list[float]]


def flow_spacing(steps: int) -> list[float]:
    """Unshifted flow sigmas: `linspace(1, 1/N, N)` (the schedule does not end at 0), as torch
    computes it in float32 (Z-Image's pipeline does so)."""
    return to_floats(torch.linspace(1.0, 1 / steps, steps))


def numpy_flow_spacing(steps: int) -> list[float]:
    """The same spacing as numpy computes it in float64 (FLUX-style pipelines do so); the
    scheduler rounds it to float32, which may differ from torch's by a unit in the last place."""
    return [float(s) for s in np.linspace(1.0, 1 / steps, steps)]


def flow_sampling(config: Mapping[str, Any], mu: float) -> FlowSampling:
    """The model's shift as a sigma table: its config's `shift`, or with dynamic shifting the
    exponential shift `mu` for this image's token count."""
    if config.get("use_dynamic_shifting"):
        return FlowSampling(mu=mu)
    return FlowSampling(float(config.get("shift", 1.0)))


def model_sigmas(
    config: Mapping[str, Any],
    steps: int,
    mu: float,
    schedule: str = "simple",
    spacing: Spacing = flow_spacing,
) -> list[float]:
    """The `steps` sigmas and the final 0 the model visits under `schedule`."""
    if schedule != "simple":
        return schedule_sigmas(schedule, flow_sampling(config, mu), steps)
    if steps == 1 and config.get("shift_terminal"):
        # diffusers stretches the sigmas so the last step ends at the terminal level, dividing
        # by the last step's distance from 1: one step has none, and every sigma comes out NaN.
        raise InvalidRequest(
            "one step cannot run on this model's own schedule ('simple'): its scheduler "
            f"stretches the sigmas to a terminal level ({config['shift_terminal']:g}), which "
            "takes at least 2 steps; give 2 or more steps, another schedule, or a fixed shift"
        )
    return [*_pipeline_sigmas(config, steps, mu, spacing), 0.0]


# (config, steps, mu, spacing) -> the pipeline's sigmas: a render at settings seen before reads
# them back instead of building diffusers' scheduler again (about 2 ms of a tiny render).
SIGMAS: Kept[tuple[str, int, float, Spacing], tuple[float, ...]] = Kept(64)


def _pipeline_sigmas(
    config: Mapping[str, Any], steps: int, mu: float, spacing: Spacing
) -> tuple[float, ...]:
    """The sigmas diffusers' `FlowMatchEulerDiscreteScheduler` sets for `config` (its final 0
    left off), remembered per settings where the spacing is one of this module's (pure functions
    of the step count; a caller's own, e.g. a closure over given sigmas, is run each time)."""
    if spacing not in PURE_SPACINGS:
        return scheduler_sigmas(config, steps, mu, spacing)
    key = (json.dumps(config, sort_keys=True, default=repr), steps, mu, spacing)
    return SIGMAS.get(key, lambda: scheduler_sigmas(config, steps, mu, spacing))


def scheduler_sigmas(
    config: Mapping[str, Any], steps: int, mu: float, spacing: Spacing
) -> tuple[float, ...]:
    scheduler = diffusers().FlowMatchEulerDiscreteScheduler.from_config(dict(config))
    scheduler.set_timesteps(sigmas=spacing(steps), mu=mu)
    return tuple(to_floats(cast(torch.Tensor, scheduler.sigmas)[:-1]))


PURE_SPACINGS: tuple[Spacing, ...] = (flow_spacing, numpy_flow_spacing)


def unipc_timesteps(levels: list[float], device: torch.device) -> torch.Tensor:
    """The timesteps diffusers' `UniPCMultistepScheduler` feeds a flow model at `levels`: each
    sigma times 1000 in float32, truncated to an integer (its pipelines' UniPC renders so)."""
    scaled = torch.tensor(levels, dtype=torch.float32) * TRAIN_TIMESTEPS
    return scaled.to(device=device, dtype=torch.int64)


# What a diffusers UniPC config may ask for, and what the library's UniPC runs of it.
_UNIPC_RUNS: dict[str, object] = {
    "prediction_type": "flow_prediction",
    "use_flow_sigmas": True,
    "predict_x0": True,
    "thresholding": False,
    "lower_order_final": True,
    "solver_p": None,
}


def unipc_of_config(config: Mapping[str, Any]) -> UniPC:
    """The library's UniPC for a flow model's diffusers `UniPCMultistepScheduler` config: its
    `solver_type` and `solver_order`. A setting the library does not run is an error, never
    another sampler."""
    for key, runs in _UNIPC_RUNS.items():
        if key in config and config[key] != runs:
            raise ValueError(f"UniPC with {key}={config[key]!r} is not run here (only {runs!r})")
    if config.get("disable_corrector"):
        raise ValueError("UniPC with disable_corrector is not run here")
    return UniPC(config.get("solver_type", "bh2"), int(config.get("solver_order", 2)))
