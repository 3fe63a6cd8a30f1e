"""ComfyUI's `deis` (tab mode) against its published construction: a VP process fitted to EDM's
range, and Adams-Bashforth weights that integrate the Lagrange basis against DEIS's integrand
(which is d sigma / d t, so the weights of a constant derivative sum to the step in sigma); and
against diffusers' `DEISMultistepScheduler` where the two claim the same thing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.algorithms.deis import coefficients, vp_times
from inline_core.diffusion.sigma.noise import NoNoise
from inline_core.diffusion.sigma.sampling import DiscreteSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper, call_sigmas


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


def eps_model(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """A smooth toy epsilon model of k-diffusion's scaled latent."""
    return torch.tanh(x / (sigma**2 + 1) ** 0.5) * 0.5 + 0.1


def with_diffusers(
    steps: int, x: torch.Tensor, model: Callable[..., torch.Tensor]
) -> tuple[torch.Tensor, list[float]]:
    """diffusers' DEISMultistepScheduler (order 3, log-rho) over its Karras sigmas, driven in its
    own VP variables; the result in k-diffusion's (x / alpha), and the sigmas it visited."""
    scheduler = diffusers().DEISMultistepScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        solver_order=3,
        use_karras_sigmas=True,
    )
    scheduler.set_timesteps(steps)
    sigmas = to_floats(scheduler.sigmas)
    sample = x * sigmas[0] / (sigmas[0] ** 2 + 1) ** 0.5
    for i, t in enumerate(scheduler.timesteps):
        scaled = sample * (sigmas[i] ** 2 + 1) ** 0.5
        sample = scheduler.step(model(scaled, sigmas[i]), t, sample).prev_sample
    return sample * (sigmas[-1] ** 2 + 1) ** 0.5, sigmas


def with_ours(
    sigmas: list[float], x: torch.Tensor, model: Callable[..., torch.Tensor]
) -> torch.Tensor:
    stepper = SigmaStepper("deis", DiscreteSampling(), sigmas, x * sigmas[0], NoNoise())
    while stepper.result is None:
        stepper.advance(model(*stepper.call))
    return stepper.result


QUIET = pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # diffusers' numpy


@QUIET
def test_with_a_constant_epsilon_deis_is_diffusers_deis() -> None:
    """Where the two discretisations claim the same thing: an epsilon constant along the path is
    integrated exactly by both (ComfyUI's weights up to its float32 quadrature)."""
    x = torch.randn((1, 4, 8, 8), generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def constant(point: torch.Tensor, sigma: float) -> torch.Tensor:
        return torch.full_like(point, 0.3)

    theirs, sigmas = with_diffusers(12, x, constant)
    ours = with_ours(sigmas, x.to(torch.float32), constant)
    torch.testing.assert_close(ours, theirs.to(torch.float32), rtol=0, atol=2e-3 * sigmas[0])


@QUIET
def test_deis_and_diffusers_deis_converge_to_one_solution() -> None:
    """Otherwise they are two discretisations of one ODE (ComfyUI's Adams-Bashforth in VP time,
    diffusers' in log-rho): they differ at few steps and meet as the steps grow."""
    x = torch.randn((1, 4, 8, 8), generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    gaps: list[float] = []
    for steps in (8, 32):
        theirs, sigmas = with_diffusers(steps, x, eps_model)
        ours = with_ours(sigmas, x.to(torch.float32), eps_model)
        gaps.append(float((ours - theirs.to(torch.float32)).abs().max()))
    assert gaps[1] < gaps[0] / 4, gaps
    assert gaps[1] < 0.05, gaps
