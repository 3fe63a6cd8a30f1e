"""Sigma schedules under ComfyUI's names (`comfy/samplers.py`, `k_diffusion/sampling.py`): each
takes a model's `ModelSampling` and a step count and returns `steps + 1` sigmas ending at 0,
rounded to float32 as ComfyUI's tensors hold them. A flow model's shift is already in its table,
so every schedule here is shifted."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from inline_core.diffusion.libs import to_floats
from inline_core.diffusion.sigma.beta_ppf import beta_ppf
from inline_core.diffusion.sigma.sampling import ModelSampling
from inline_core.graph.sampler_names import SCHEDULES


def _f32(values: list[float]) -> list[float]:
    return to_floats(torch.tensor(values, dtype=torch.float32))


def karras(sampling: ModelSampling, steps: int, rho: float = 7.0) -> list[float]:
    ramp = torch.linspace(0, 1, steps)
    lo, hi = sampling.sigma_min ** (1 / rho), sampling.sigma_max ** (1 / rho)
    return [*to_floats((hi + ramp * (lo - hi)) ** rho), 0.0]


def exponential(sampling: ModelSampling, steps: int) -> list[float]:
    logs = torch.linspace(math.log(sampling.sigma_max), math.log(sampling.sigma_min), steps)
    return [*to_floats(logs.exp()), 0.0]


def normal(sampling: ModelSampling, steps: int, *, sgm: bool = False) -> list[float]:
    start, end = sampling.timestep(sampling.sigma_max), sampling.timestep(sampling.sigma_min)
    append_zero = True
    if sgm:
        timesteps = torch.linspace(start, end, steps + 1)[:-1]
    else:
        if math.isclose(sampling.sigma(end), 0, abs_tol=0.00001):
            steps += 1
            append_zero = False
        timesteps = torch.linspace(start, end, steps)
    sigmas = [sampling.sigma(t) for t in to_floats(timesteps)]
    return _f32(sigmas + [0.0] if append_zero else sigmas)


def sgm_uniform(sampling: ModelSampling, steps: int) -> list[float]:
    return normal(sampling, steps, sgm=True)


def simple(sampling: ModelSampling, steps: int) -> list[float]:
    table = to_floats(sampling.sigmas)
    stride = len(table) / steps
    return [table[-(1 + int(i * stride))] for i in range(steps)] + [0.0]


def ddim_uniform(sampling: ModelSampling, steps: int) -> list[float]:
    table = to_floats(sampling.sigmas)
    index = 1
    if math.isclose(table[index], 0, abs_tol=0.00001):
        steps += 1
        sigmas: list[float] = []
    else:
        sigmas = [0.0]
    stride = max(len(table) // steps, 1)
    while index < len(table):
        sigmas.append(table[index])
        index += stride
    return sigmas[::-1]


def beta(sampling: ModelSampling, steps: int, alpha: float = 0.6, b: float = 0.6) -> list[float]:
    table = to_floats(sampling.sigmas)
    total = len(table) - 1
    quantiles = 1 - np.linspace(0, 1, steps, endpoint=False)
    points = [float(np.rint(beta_ppf(float(q), alpha, b) * total)) for q in quantiles]
    sigmas: list[float] = []
    last = -1.0
    for t in points:
        if t != last:
            sigmas.append(table[int(t)])
        last = t
    return sigmas + [0.0]


def linear_quadratic(
    sampling: ModelSampling, steps: int, threshold_noise: float = 0.025
) -> list[float]:
    """Mochi's schedule: linear for the first half, quadratic after, as ComfyUI computes it."""
    if steps == 1:
        levels = [1.0, 0.0]
    else:
        linear_steps = steps // 2
        linear = [i * threshold_noise / linear_steps for i in range(linear_steps)]
        step_diff = linear_steps - threshold_noise * steps
        quadratic_steps = steps - linear_steps
        quad_coef = step_diff / (linear_steps * quadratic_steps**2)
        lin_coef = threshold_noise / linear_steps - 2 * step_diff / (quadratic_steps**2)
        const = quad_coef * (linear_steps**2)
        quadratic = [quad_coef * i**2 + lin_coef * i + const for i in range(linear_steps, steps)]
        levels = [1.0 - x for x in [*linear, *quadratic, 1.0]]
    sigma_max = to_floats(sampling.sigmas[-1:])[0]
    return to_floats(torch.tensor(levels, dtype=torch.float32) * sigma_max)


def kl_optimal(sampling: ModelSampling, steps: int) -> list[float]:
    """Align Your Steps' KL-optimal schedule: uniform in arctan(sigma)."""
    idx = torch.arange(steps, dtype=torch.float).div_(max(steps - 1, 1))
    lo, hi = math.atan(sampling.sigma_min), math.atan(sampling.sigma_max)
    return [*to_floats((idx * lo + (1 - idx) * hi).tan_()), 0.0]


SCHEDULE_FUNCTIONS: dict[str, Callable[[ModelSampling, int], list[float]]] = {
    "simple": simple,
    "normal": normal,
    "karras": karras,
    "exponential": exponential,
    "sgm_uniform": sgm_uniform,
    "beta": beta,
    "linear_quadratic": linear_quadratic,
    "kl_optimal": kl_optimal,
    "ddim_uniform": ddim_uniform,
}
assert tuple(SCHEDULE_FUNCTIONS) == SCHEDULES


def schedule_sigmas(name: str, sampling: ModelSampling, steps: int) -> list[float]:
    """The sigmas `name` visits over `steps` steps, ending at 0."""
    function = SCHEDULE_FUNCTIONS.get(name)
    if function is None:
        raise ValueError(f"unknown schedule {name!r}; choose one of {SCHEDULES}")
    return function(sampling, steps)
