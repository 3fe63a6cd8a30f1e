"""ComfyUI's `deis` (tab mode) against its published construction: a VP process fitted to EDM's
range, and Adams-Bashforth weights that integrate the Lagrange basis against DEIS's integrand
(which is d sigma / d t, so the weights of a constant derivative sum to the step in sigma)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.algorithms.deis import coefficients, vp_times
from inline_core.diffusion.sigma.sampling import DiscreteSampling
from inline_core.diffusion.sigma.stepper import call_sigmas


def test_the_fitted_vp_process_spans_edms_range() -> None:
    t_min, t_max, t_zero = vp_times([0.002, 80.0, 0.0])
    assert t_min == pytest.approx(1e-3, rel=1e-3)
    assert t_max == pytest.approx(1.0, rel=1e-4)
    assert 0.0 <= t_zero < 1e-3  # 0 up to float32's cancellation, as ComfyUI computes it


def sigma_of(t: np.ndarray) -> np.ndarray:
    """The fitted process's sigma at time t: sqrt(1 / alpha_bar - 1)."""
    low, high = np.log(0.002**2 + 1), np.log(80.0**2 + 1)
    beta_d = 2 * (low / 1e-3 - high) / (1e-3 - 1)
    beta_min = high - 0.5 * beta_d
    return np.sqrt(np.exp(0.5 * beta_d * t**2 + beta_min * t) - 1)


@pytest.mark.parametrize("order", [2, 3])
def test_weights_integrate_the_lagrange_basis_against_d_sigma(order: int) -> None:
    sigmas = schedules.schedule_sigmas("karras", DiscreteSampling(), 8)
    times = vp_times(sigmas)
    i = 4
    weights = coefficients(times, i, order)
    # A constant derivative: the weights sum to the step in sigma.
    assert sum(weights) == pytest.approx(sigmas[i + 1] - sigmas[i], rel=2e-3)
    # A derivative linear in t: exact for the basis, so sum w_j t_j = integral of t dsigma.
    grid = np.linspace(times[i], times[i + 1], 200001)
    dsigma = np.diff(sigma_of(grid))
    exact = float(np.sum((grid[1:] + grid[:-1]) / 2 * dsigma))
    ours = sum(w * times[i - j] for j, w in enumerate(weights))
    assert ours == pytest.approx(exact, rel=2e-3)


def test_deis_calls_once_a_step() -> None:
    sigmas = schedules.schedule_sigmas("karras", DiscreteSampling(), 9)
    assert call_sigmas("deis", DiscreteSampling(), sigmas) == sigmas[:-1]
    assert torch.isfinite(torch.tensor(vp_times(sigmas))).all()
