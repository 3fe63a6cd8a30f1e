"""The sigma library against diffusers' schedulers on a fixed toy model: the same start, the same
sigmas, the same noise where a sampler draws any; k-diffusion's VE latents are diffusers' VP
latents times sqrt(1 + sigma^2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.noise import RowNoise
from inline_core.diffusion.sigma.prediction import model_input
from inline_core.diffusion.sigma.sampling import DiscreteSampling, FlowSampling, ModelSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper

Model = Callable[[torch.Tensor], torch.Tensor]


def toy(x: torch.Tensor) -> torch.Tensor:
    """A smooth, fixed stand-in for a network: its output depends on what it is fed only."""
    return 0.6 * torch.tanh(x) + 0.15 * x + 0.05


def start(shape: tuple[int, ...] = (1, 4, 6, 6)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(7))


def library(
    name: str, sampling: ModelSampling, sigmas: list[float], x: torch.Tensor, seed: int = 0
) -> tuple[torch.Tensor, int]:
    noise = RowNoise([torch.Generator().manual_seed(seed)])
    stepper = SigmaStepper(name, sampling, sigmas, x, noise)
    calls = 0
    while stepper.result is None:
        point, sigma = stepper.call
        stepper.advance(toy(model_input(sampling, point, sigma)))
        calls += 1
    assert calls == stepper.step_count
    return stepper.result, calls


def scheduler(cls: str, **config: Any) -> Any:
    base = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear"}
    return getattr(diffusers(), cls)(**base, **config)


def ve_loop(s: Any, x: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
    """diffusers' VE schedulers (Euler, Heun): the sample is k-diffusion's x."""
    generator = torch.Generator().manual_seed(seed)
    calls = 0
    for t in s.timesteps:
        out = toy(s.scale_model_input(x, t))
        extra = {"generator": generator} if "Ancestral" in type(s).__name__ else {}
        x = s.step(out, t, x, return_dict=False, **extra)[0]
        calls += 1
    return x, calls


def vp_loop(s: Any, x: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
    """diffusers' VP schedulers (DDIM, DPM-Solver): the sample is x / sqrt(1 + sigma^2)."""
    generator = torch.Generator().manual_seed(seed)
    for t in s.timesteps:
        x = s.step(toy(x), t, x, generator=generator, return_dict=False)[0]
    return x, len(s.timesteps)


def sigmas_of(s: Any) -> list[float]:
    return to_floats(s.sigmas.to(torch.float64))


def close(a: torch.Tensor, b: torch.Tensor, tol: float = 2e-5) -> None:
    assert a.shape == b.shape
    err = float((a.double() - b.double()).abs().max())
    assert err <= tol * max(1.0, float(b.abs().max())), err


@pytest.mark.parametrize("karras", [False, True])
def test_euler_is_diffusers_euler_discrete(karras: bool) -> None:
    s = scheduler("EulerDiscreteScheduler", use_karras_sigmas=karras)
    s.set_timesteps(10)
    sigmas = sigmas_of(s)
    x = start() * sigmas[0]
    ours, calls = library("euler", DiscreteSampling(), sigmas, x)
    theirs, their_calls = ve_loop(s, x)
    close(ours, theirs)
    assert calls == their_calls == 10


def test_euler_ancestral_is_diffusers_euler_ancestral_with_the_same_noise() -> None:
    s = scheduler("EulerAncestralDiscreteScheduler")
    s.set_timesteps(10)
    sigmas = sigmas_of(s)
    x = start() * sigmas[0]
    ours, _ = library("euler_ancestral", DiscreteSampling(), sigmas, x, seed=3)
    theirs, _ = ve_loop(s, x, seed=3)
    close(ours, theirs)
    other, _ = library("euler_ancestral", DiscreteSampling(), sigmas, x, seed=4)
    assert float((other - ours).abs().max()) > 1e-3  # the noise is what differs


def test_heun_is_diffusers_heun() -> None:
    s = scheduler("HeunDiscreteScheduler", use_karras_sigmas=True)
    s.set_timesteps(8)
    sigmas = sigmas_of(s)
    steps = [sigmas[0], *sigmas[1::2]]  # its table visits each inner sigma twice
    x = start() * steps[0]
    ours, calls = library("heun", DiscreteSampling(), steps, x)
    theirs, their_calls = ve_loop(s, x)
    close(ours, theirs)
    assert calls == their_calls == 15


def test_ddim_is_diffusers_ddim_at_eta_zero() -> None:
    s = scheduler("DDIMScheduler", set_alpha_to_one=True, clip_sample=False)
    s.set_timesteps(10)
    sampling = DiscreteSampling()
    sigmas = [float(sampling.sigmas[int(t)]) for t in s.timesteps] + [0.0]
    x = start() * (sigmas[0] ** 2 + 1) ** 0.5
    ours, _ = library("ddim", sampling, sigmas, x)
    theirs, _ = vp_loop(s, x / (sigmas[0] ** 2 + 1) ** 0.5)
    close(ours, theirs, 1e-4)


@pytest.mark.parametrize(
    ("name", "algorithm", "solver"),
    [
        ("dpmpp_2m", "dpmsolver++", "midpoint"),
        ("dpmpp_2m_sde", "sde-dpmsolver++", "midpoint"),
        ("dpmpp_2m_sde_heun", "sde-dpmsolver++", "heun"),
    ],
)
def test_dpmpp_2m_is_diffusers_dpm_solver_multistep(name: str, algorithm: str, solver: str) -> None:
    s = scheduler(
        "DPMSolverMultistepScheduler",
        algorithm_type=algorithm,
        solver_type=solver,
        solver_order=2,
        use_karras_sigmas=True,
        final_sigmas_type="zero",
    )
    s.set_timesteps(12)
    sigmas = sigmas_of(s)
    x = start() * (sigmas[0] ** 2 + 1) ** 0.5
    ours, calls = library(name, DiscreteSampling(), sigmas, x, seed=5)
    theirs, their_calls = vp_loop(s, x / (sigmas[0] ** 2 + 1) ** 0.5, seed=5)
    close(ours, theirs, 1e-4)
    assert calls == their_calls == 12


@pytest.mark.parametrize("name", ["dpmpp_2m", "dpmpp_2m_sde"])
@pytest.mark.parametrize(
    ("schedule", "flag"),
    [("karras", "use_karras_sigmas"), ("exponential", "use_exponential_sigmas")],
)
def test_dpmpp_2m_on_our_schedule_is_diffusers_with_its_sigmas_flag(
    name: str, schedule: str, flag: str
) -> None:
    """The schedule from the library's own `schedules` (not diffusers' sigmas): the whole render
    equals `DPMSolverMultistepScheduler` with the flag. diffusers' `use_beta_sigmas` spaces a beta
    distribution over the sigma range, ComfyUI's `beta` over the timestep table (whose formula
    `test_sigma_library.py` checks), so they are two schedules and have no parity."""
    algorithm = "sde-dpmsolver++" if name.endswith("_sde") else "dpmsolver++"
    s = scheduler(
        "DPMSolverMultistepScheduler",
        algorithm_type=algorithm,
        solver_order=2,
        final_sigmas_type="zero",
        **{flag: True},
    )
    s.set_timesteps(12)
    sigmas = schedules.schedule_sigmas(schedule, DiscreteSampling(), 12)
    x = start() * (sigmas[0] ** 2 + 1) ** 0.5
    ours, _ = library(name, DiscreteSampling(), sigmas, x, seed=5)
    theirs, _ = vp_loop(s, x / (sigmas[0] ** 2 + 1) ** 0.5, seed=5)
    close(ours, theirs, 1e-4)


def test_flow_euler_is_diffusers_flow_match_euler_bit_for_bit() -> None:
    s = diffusers().FlowMatchEulerDiscreteScheduler(shift=3.0)
    s.set_timesteps(9)
    sigmas = sigmas_of(s)
    x = start()
    ours, _ = library("euler", FlowSampling(3.0), sigmas, x)
    theirs = x
    for t in s.timesteps:
        theirs = s.step(toy(theirs), t, theirs, return_dict=False)[0]
    assert torch.equal(ours, theirs)


def test_v_prediction_euler_is_diffusers_euler_with_v_prediction() -> None:
    s = scheduler("EulerDiscreteScheduler", prediction_type="v_prediction")
    s.set_timesteps(10)
    sigmas = sigmas_of(s)
    x = start() * sigmas[0]
    ours, _ = library("euler", DiscreteSampling("v"), sigmas, x)
    theirs, _ = ve_loop(s, x)
    close(ours, theirs, 1e-4)


def test_dpm_2_is_diffusers_kdpm2() -> None:
    s = scheduler("KDPM2DiscreteScheduler", use_karras_sigmas=True)
    s.set_timesteps(8)
    sigmas = sigmas_of(s)
    steps = [sigmas[0], *sigmas[1:-1:2]]  # each inner sigma twice, then three zeros
    assert len(steps) == 9 and steps[-1] == 0
    x = start() * steps[0]
    ours, calls = library("dpm_2", DiscreteSampling(), steps, x)
    theirs, their_calls = ve_loop(s, x)
    close(ours, theirs, 1e-4)
    assert calls == their_calls == 15  # the last step, down to 0, is one Euler call


def calls_and_result(
    name: str, sampling: ModelSampling, sigmas: list[float], x: torch.Tensor, seed: int = 0
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Every point the model is fed, and the result."""
    noise = RowNoise([torch.Generator().manual_seed(seed)])
    stepper = SigmaStepper(name, sampling, sigmas, x, noise)
    fed: list[torch.Tensor] = []
    while stepper.result is None:
        point, sigma = stepper.call
        fed.append(model_input(sampling, point, sigma))
        stepper.advance(toy(fed[-1]))
    return fed, stepper.result


def test_lms_is_diffusers_lms_until_comfyuis_last_step() -> None:
    pytest.importorskip("scipy")  # diffusers integrates LMS's coefficients with scipy
    s = scheduler("LMSDiscreteScheduler", use_karras_sigmas=True)
    s.set_timesteps(10)
    sigmas = sigmas_of(s)
    x = start() * sigmas[0]
    fed, result = calls_and_result("lms", DiscreteSampling(), sigmas, x)
    theirs, their_fed = x, list[torch.Tensor]()
    for t in s.timesteps:
        their_fed.append(s.scale_model_input(theirs, t))
        theirs = s.step(toy(their_fed[-1]), t, theirs, return_dict=False)[0]
    assert len(fed) == len(their_fed) == 10
    for ours_in, their_in in zip(fed, their_fed, strict=True):
        close(ours_in, their_in, 1e-4)  # diffusers integrates numerically (epsrel 1e-4)
    # ComfyUI's (and the library's) last step to 0 is the model's clean estimate, where
    # diffusers integrates its polynomial down to 0.
    last, sigma = fed[-1] * (sigmas[-2] ** 2 + 1) ** 0.5, sigmas[-2]
    torch.testing.assert_close(result, last - sigma * toy(fed[-1]), atol=1e-5, rtol=0)


def test_lcm_is_diffusers_lcm_with_the_same_noise() -> None:
    s = scheduler("LCMScheduler")
    s.set_timesteps(4)
    sampling = DiscreteSampling()
    sigmas = [float(sampling.sigmas[int(t)]) for t in s.timesteps] + [0.0]
    x = start() * (sigmas[0] ** 2 + 1) ** 0.5
    fed, result = calls_and_result("lcm", sampling, sigmas, x, seed=6)
    generator = torch.Generator().manual_seed(6)
    theirs = x / (sigmas[0] ** 2 + 1) ** 0.5
    for i, t in enumerate(s.timesteps):
        close(fed[i], theirs, 1e-4)
        theirs = s.step(toy(theirs), t, theirs, generator=generator, return_dict=False)[0]
    # LCM's boundary condition (c_skip at most 1e-5 here) is all that differs.
    close(result, theirs, 1e-4)
    _, other = calls_and_result("lcm", sampling, sigmas, x, seed=7)
    assert float((other - result).abs().max()) > 1e-3  # the noise is what differs
