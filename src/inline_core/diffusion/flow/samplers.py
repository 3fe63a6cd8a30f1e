"""Samplers and sigma schedules for a flow-matching model, built from diffusers' schedulers.

A schedule says which noise levels (sigmas) a render visits; a sampler says how it moves between
them. The two are independent, as in ComfyUI:

- Schedules start from the model's own sigmas: its scheduler config's shift applied to the flow
  spacing `linspace(1, 1/N, N)`, computed by diffusers' `FlowMatchEulerDiscreteScheduler`
  exactly as diffusers' flow pipelines do (`simple`). `karras` and `exponential` respace
  that range with the same scheduler's own conversions (`use_karras_sigmas`,
  `use_exponential_sigmas`). Beta sigmas need scipy, which this install does not ship, so they
  are not offered.
- Samplers take those sigmas as they are: `euler` (FlowMatchEuler), `heun` (FlowMatchHeun: two
  forwards per step, so a schedule of N steps takes 2N-1 scheduler steps, each one forward),
  `dpmpp_2m` (DPMSolverMultistep, DPM-Solver++ 2M on flow sigmas) and `uni_pc_bh2`
  (UniPCMultistep with flow sigmas and its bh2 solver). UniPC's bh1 solver (ComfyUI's `uni_pc`) is
  not offered: its B(h) = h diverges on the last step to sigma 0, and diffusers renders NaN.

Every sampler advances one scheduler step per transformer forward, which is what the step protocol
needs: each request keeps its own scheduler (its multistep history or its Heun half-step), and the
forward can still be shared with other requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np
import torch

from inline_core.diffusion.libs import diffusers, to_floats

SAMPLERS: tuple[str, ...] = ("euler", "heun", "dpmpp_2m", "uni_pc_bh2")
SCHEDULES: tuple[str, ...] = ("simple", "karras", "exponential")

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


def model_sigmas(
    config: Mapping[str, Any],
    steps: int,
    mu: float,
    schedule: str = "simple",
    spacing: Spacing = flow_spacing,
) -> list[float]:
    """The `steps` sigmas (without the final 0) the model's scheduler visits, respaced by
    `schedule`."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
    flags = {
        "use_karras_sigmas": schedule == "karras",
        "use_exponential_sigmas": schedule == "exponential",
        "use_beta_sigmas": False,
    }
    scheduler = diffusers().FlowMatchEulerDiscreteScheduler.from_config(dict(config), **flags)
    scheduler.set_timesteps(sigmas=spacing(steps), mu=mu)
    return to_floats(cast(torch.Tensor, scheduler.sigmas)[:-1])


def _euler(sigmas: list[float], device: torch.device) -> Any:
    # shift 1 and no dynamic shifting: the sigmas go in as they are (1 * s / (1 + 0 * s) == s).
    scheduler = diffusers().FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=TRAIN_TIMESTEPS, shift=1.0, use_dynamic_shifting=False
    )
    scheduler.set_timesteps(sigmas=sigmas, device=device)
    return scheduler


def _heun(sigmas: list[float], device: torch.device) -> Any:
    scheduler = diffusers().FlowMatchHeunDiscreteScheduler(
        num_train_timesteps=TRAIN_TIMESTEPS, shift=1.0
    )
    scheduler.set_timesteps(len(sigmas), device=device)
    # Its set_timesteps takes no custom sigmas: lay ours out the way it lays out its own (each
    # sigma after the first visited twice, the second visit being the Heun correction).
    levels = torch.tensor(sigmas, dtype=torch.float32, device=device)
    timesteps = levels * TRAIN_TIMESTEPS
    scheduler.timesteps = torch.cat([timesteps[:1], timesteps[1:].repeat_interleave(2)])
    padded = torch.cat([levels, torch.zeros(1, device=device)])
    scheduler.sigmas = torch.cat([padded[:1], padded[1:-1].repeat_interleave(2), padded[-1:]]).cpu()
    return scheduler


def _dpmpp_2m(sigmas: list[float], device: torch.device) -> Any:
    scheduler = diffusers().DPMSolverMultistepScheduler(
        num_train_timesteps=TRAIN_TIMESTEPS,
        solver_order=2,
        algorithm_type="dpmsolver++",
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=1.0,
        final_sigmas_type="zero",
    )
    scheduler.set_timesteps(len(sigmas), device=device)
    # Its set_timesteps takes no custom sigmas: replace its flow sigmas (which only approximate
    # the model's) with ours. The step reads sigmas by index, so these are what it integrates.
    levels = torch.tensor(sigmas, dtype=torch.float32)
    scheduler.sigmas = torch.cat([levels, torch.zeros(1)])
    scheduler.timesteps = (levels * TRAIN_TIMESTEPS).to(device)
    return scheduler


def _uni_pc_bh2(sigmas: list[float], device: torch.device) -> Any:
    scheduler = diffusers().UniPCMultistepScheduler(
        num_train_timesteps=TRAIN_TIMESTEPS,
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=1.0,
        solver_type="bh2",
        final_sigmas_type="zero",
    )
    # It shifts the array it is given (a list would not broadcast).
    scheduler.set_timesteps(sigmas=np.array(sigmas, dtype=np.float32), device=device)
    return scheduler


_BUILDERS: dict[str, Callable[[list[float], torch.device], Any]] = {
    "euler": _euler,
    "heun": _heun,
    "dpmpp_2m": _dpmpp_2m,
    "uni_pc_bh2": _uni_pc_bh2,
}


def sampler_scheduler(sampler: str, sigmas: list[float], device: torch.device) -> Any:
    """A fresh diffusers scheduler for `sampler` that visits `sigmas`, then 0."""
    build = _BUILDERS.get(sampler)
    if build is None:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {SAMPLERS}")
    return build(sigmas, device)
