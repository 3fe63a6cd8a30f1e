"""The sigma library's schedules and samplers against their published formulas, on toy inputs
with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.algorithms.multistep import lms_coefficient
from inline_core.diffusion.sigma.beta_ppf import beta_cdf, beta_ppf
from inline_core.diffusion.sigma.noise import NoNoise, RowNoise
from inline_core.diffusion.sigma.sampling import DiscreteSampling, FlowSampling, ModelSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper, call_sigmas
from inline_core.graph.sampler_names import (
    CFG_PP_SAMPLERS,
    MULTISTEP_SAMPLERS,
    SCHEDULES,
    SIGMA_SAMPLERS,
)

SAMPLINGS = [DiscreteSampling(), DiscreteSampling("v"), FlowSampling(3.0)]


def test_karras_and_exponential_match_diffusers_on_the_same_range() -> None:
    sampling = DiscreteSampling()
    for flag, name in (("use_karras_sigmas", "karras"), ("use_exponential_sigmas", "exponential")):
        s = diffusers().EulerDiscreteScheduler(
            beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", **{flag: True}
        )
        s.set_timesteps(12)
        ours = schedules.schedule_sigmas(name, sampling, 12)
        np.testing.assert_allclose(ours, to_floats(s.sigmas), rtol=2e-5)


def test_flow_schedules_are_diffusers_flow_spacings() -> None:
    s = diffusers().FlowMatchEulerDiscreteScheduler(shift=3.0)
    s.set_timesteps(8)  # its own spacing: even in timesteps from sigma_max to sigma_min
    ours = schedules.schedule_sigmas("normal", FlowSampling(3.0), 8)
    np.testing.assert_allclose(ours, to_floats(s.sigmas), atol=1e-6)
    # The flow pipelines' `linspace(1, 1/N, N)`, shifted: ComfyUI's `simple` where N divides 1000.
    s.set_timesteps(sigmas=np.linspace(1.0, 1 / 8, 8).tolist())
    ours = schedules.schedule_sigmas("simple", FlowSampling(3.0), 8)
    np.testing.assert_allclose(ours, to_floats(s.sigmas), atol=1e-6)


def test_kl_optimal_is_uniform_in_arctan_sigma() -> None:
    sampling = DiscreteSampling()
    sigmas = schedules.schedule_sigmas("kl_optimal", sampling, 6)
    angles = [math.atan(s) for s in sigmas[:-1]]
    np.testing.assert_allclose(np.diff(angles), np.diff(angles)[0], rtol=1e-4)
    assert sigmas[0] == pytest.approx(sampling.sigma_max, rel=1e-6)
    assert sigmas[-2] == pytest.approx(sampling.sigma_min, rel=1e-5) and sigmas[-1] == 0


def test_linear_quadratic_is_linear_then_quadratic_to_zero() -> None:
    sigmas = schedules.schedule_sigmas("linear_quadratic", FlowSampling(1.0), 10)
    assert len(sigmas) == 11 and sigmas[0] == 1.0 and sigmas[-1] == 0.0
    # The first half falls linearly to 1 - threshold (0.025) over 5 steps.
    np.testing.assert_allclose(sigmas[:6], [1 - 0.005 * i for i in range(6)], atol=1e-6)
    second = np.diff(sigmas[5:], n=2)
    np.testing.assert_allclose(second, second[0], atol=1e-5)  # constant: quadratic


def test_beta_quantiles_invert_the_distribution() -> None:
    assert beta_cdf(0.5, 0.6, 0.6) == pytest.approx(0.5, abs=1e-12)
    for q in (0.01, 0.2, 0.5, 0.77, 0.99):
        assert beta_cdf(beta_ppf(q, 0.6, 0.6), 0.6, 0.6) == pytest.approx(q, abs=1e-10)
    assert beta_ppf(0.3, 2.0, 1.0) == pytest.approx(math.sqrt(0.3), abs=1e-12)  # cdf x^2


def test_beta_is_comfyuis_beta_scheduler() -> None:
    """ComfyUI's `beta_scheduler` (alpha = beta = 0.6) with scipy's quantiles (the test env has
    scipy; the server does not need it): the table's sigmas at the beta quantiles of the
    timesteps, a repeated timestep once. Every even count meets the median's 499.5, which rounds
    to 500 only from the exact quantile."""
    from scipy import stats  # pyright: ignore[reportMissingTypeStubs]

    sampling = DiscreteSampling()
    table = to_floats(sampling.sigmas)
    total = len(table) - 1
    for steps in range(1, 61):
        quantiles = 1 - np.linspace(0, 1, steps, endpoint=False)
        ts = np.rint(stats.beta.ppf(quantiles, 0.6, 0.6) * total)  # pyright: ignore
        expected: list[float] = []
        last = -1.0
        for t in [float(v) for v in ts]:  # pyright: ignore[reportUnknownVariableType]
            if t != last:
                expected.append(table[int(t)])
            last = t
        expected.append(0.0)
        assert schedules.schedule_sigmas("beta", sampling, steps) == expected, steps


@pytest.mark.parametrize("name", SCHEDULES)
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["eps", "v", "flow"])
def test_every_schedule_falls_to_zero(name: str, sampling: ModelSampling) -> None:
    sigmas = schedules.schedule_sigmas(name, sampling, 7)
    # ComfyUI's ddim_uniform strides the table by 1000 // steps, which may give a step more.
    assert len(sigmas) == (9 if name == "ddim_uniform" else 8) and sigmas[-1] == 0.0
    assert all(a > b for a, b in zip(sigmas, sigmas[1:], strict=False))


def test_normal_on_a_discrete_model_walks_its_timesteps_evenly() -> None:
    sampling = DiscreteSampling()
    sigmas = schedules.schedule_sigmas("normal", sampling, 5)
    ts = [sampling.timestep(s) for s in sigmas[:-1]]
    assert ts == pytest.approx([999.0, 749.25, 499.5, 249.75, 0.0], abs=0.51)


def test_lms_coefficients_integrate_the_lagrange_basis() -> None:
    sigmas = [8.0, 5.0, 3.0, 1.5, 0.7]
    for order in (1, 2, 3):
        i = order - 1 + 1
        for j in range(order):
            grid = np.linspace(sigmas[i], sigmas[i + 1], 20001)
            basis = np.ones_like(grid)
            for k in range(order):
                if k != j:
                    basis *= (grid - sigmas[i - k]) / (sigmas[i - j] - sigmas[i - k])
            numeric = float(np.sum((basis[1:] + basis[:-1]) / 2 * np.diff(grid)))
            assert lms_coefficient(order, sigmas, i, j) == pytest.approx(numeric, rel=1e-7)


def run(
    name: str,
    sampling: ModelSampling,
    sigmas: list[float],
    x: torch.Tensor,
    seeds: list[int],
    target: torch.Tensor,
) -> torch.Tensor:
    """Sample with an oracle that knows the clean latent `target`."""
    noise = RowNoise([torch.Generator().manual_seed(s) for s in seeds])
    stepper = SigmaStepper(name, sampling, sigmas, x, noise)
    while stepper.result is None:
        point, sigma = stepper.call
        if sampling.prediction == "v":  # v = (x - x0 / (s^2 + 1)) * sqrt(s^2 + 1) / s, inverted
            s2 = sigma**2 + 1
            output = (point / s2 - target) * s2**0.5 / sigma
        else:
            output = (point - target) / sigma  # epsilon, or a flow's velocity
        stepper.advance(output)
    return stepper.result


@pytest.mark.parametrize("name", SIGMA_SAMPLERS)
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["eps", "v", "flow"])
def test_an_oracle_denoiser_lands_every_sampler_on_its_clean_latent(
    name: str, sampling: ModelSampling
) -> None:
    target = torch.linspace(-1, 1, 32).reshape(2, 1, 4, 4)
    sigmas = schedules.schedule_sigmas("karras", sampling, 6)
    noise = torch.randn(target.shape, generator=torch.Generator().manual_seed(1))
    x = (
        sampling.noise_scaling(sigmas[0], noise, target)
        if sampling.flow
        else target + noise * sigmas[0]
    )
    out = run(name, sampling, sigmas, x, [1, 2], target)
    if name.startswith("uni_pc"):  # ComfyUI's walk to 0 ends at sigma 0.001, in sigma's x
        target = target + 0.001 * (noise - target if sampling.flow else noise)
    torch.testing.assert_close(out, target, atol=2e-4, rtol=0)


@pytest.mark.parametrize("name", SIGMA_SAMPLERS)
def test_a_row_samples_the_same_alone_and_beside_another(name: str) -> None:
    sampling = FlowSampling(3.0)
    sigmas = schedules.schedule_sigmas("simple", sampling, 5)
    x = torch.randn((2, 3, 4, 4), generator=torch.Generator().manual_seed(9))

    def drift(point: torch.Tensor) -> torch.Tensor:
        return torch.tanh(point) * 0.5

    def sample(rows: torch.Tensor, seeds: list[int]) -> torch.Tensor:
        stepper = SigmaStepper(
            name,
            sampling,
            sigmas,
            rows,
            RowNoise([torch.Generator().manual_seed(s) for s in seeds]),
        )
        while stepper.result is None:
            stepper.advance(drift(stepper.call[0]))
        return stepper.result

    both = sample(x, [11, 12])
    assert torch.equal(both[1:], sample(x[1:], [12]))


def test_two_stage_samplers_call_twice_a_step_but_not_down_to_zero() -> None:
    sampling = DiscreteSampling()
    sigmas = schedules.schedule_sigmas("karras", sampling, 4)
    heun = call_sigmas("heun", sampling, sigmas)
    assert heun == [sigmas[0], sigmas[1], sigmas[1], sigmas[2], sigmas[2], sigmas[3], sigmas[3]]
    dpm2 = call_sigmas("dpm_2", sampling, sigmas)
    assert dpm2[1] == pytest.approx(math.sqrt(sigmas[0] * sigmas[1]))  # the log midpoint
    assert len(call_sigmas("dpmpp_2m", sampling, sigmas)) == 4


def test_flow_snr_samplers_start_a_hair_below_sigma_one() -> None:
    sampling = FlowSampling(3.0)
    sigmas = schedules.schedule_sigmas("simple", sampling, 4)
    assert sigmas[0] == 1.0
    first = call_sigmas("dpmpp_2m_sde", sampling, sigmas)[0]
    assert first == pytest.approx(sampling.percent_to_sigma(1e-4)) and first < 1.0


def test_an_unknown_sampler_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'seeds_2'"):
        call_sigmas("seeds_2", DiscreteSampling(), [1.0, 0.0])


def test_variable_step_ipndm_is_ipndm_on_even_steps() -> None:
    sampling = FlowSampling(1.0)
    # Even steps down to 0: orders 1 to 3 run (the last step lands on the estimate), where the
    # variable weights are Adams-Bashforth's; ComfyUI's fourth-order weights are not AB4's.
    sigmas = [1.0 - i / 4 for i in range(5)]
    x = torch.randn((1, 2, 3, 3), generator=torch.Generator().manual_seed(2))

    def sample(name: str) -> torch.Tensor:
        stepper = SigmaStepper(name, sampling, sigmas, x, RowNoise([torch.Generator()]))
        while stepper.result is None:
            stepper.advance(torch.sin(stepper.call[0]) * 0.7)
        return stepper.result

    torch.testing.assert_close(sample("ipndm_v"), sample("ipndm"), atol=1e-6, rtol=1e-6)


def test_gradient_estimation_is_its_published_recurrence() -> None:
    """On a flow model the derivative is the velocity: the toy's `v = 0.7 * sin(x)`, stepped by
    hand (Euler, then `2 * d - d_previous` with ComfyUI's gamma of 2), to the last step."""
    sampling = FlowSampling(1.0)
    sigmas = [1.0, 0.75, 0.4, 0.1, 0.0]
    x = torch.randn((1, 2, 3, 3), generator=torch.Generator().manual_seed(3))
    stepper = SigmaStepper(
        "gradient_estimation", sampling, sigmas, x, RowNoise([torch.Generator()])
    )
    while stepper.result is None:
        stepper.advance(torch.sin(stepper.call[0]) * 0.7)
    expected, old = x, None
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        d = torch.sin(expected) * 0.7
        expected = expected + (d if old is None else 2 * d - old) * (sigma_next - sigma)
        old = d
    torch.testing.assert_close(stepper.result, expected, atol=1e-6, rtol=1e-6)


def test_the_multistep_samplers_are_those_a_split_walk_changes() -> None:
    """`MULTISTEP_SAMPLERS` (what a two-stage import lists as changing the picture) are exactly
    the samplers whose walk split at a step, the second part started afresh, differs from one
    walk: on a toy flow model with no noise, at the same sigmas."""
    sampling = FlowSampling(3.0)
    sigmas = schedules.schedule_sigmas("simple", sampling, 8)

    def model(x: torch.Tensor, sigma: float) -> torch.Tensor:
        return torch.sin(3 * x) * (1 + sigma) + 0.3 * x * x

    def walk(name: str, window: list[float], x: torch.Tensor) -> torch.Tensor:
        stepper = SigmaStepper(name, sampling, window, x, NoNoise())
        while stepper.result is None:
            point, sigma = stepper.call
            stepper.advance(model(point, sigma), uncond=0.9 * model(point, sigma))
        return stepper.result

    x = torch.linspace(-1, 1, 16)
    changed = {
        name
        for name in SIGMA_SAMPLERS + CFG_PP_SAMPLERS
        if not torch.allclose(
            walk(name, sigmas, x), walk(name, sigmas[4:], walk(name, sigmas[:5], x)), atol=1e-6
        )
    }
    assert changed == set(MULTISTEP_SAMPLERS)
