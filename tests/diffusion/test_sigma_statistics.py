"""Statistical checks of the stochastic samplers' noise (diffusers' `DPMSolverSDEScheduler` draws
from torchsde's Brownian tree, which this install lacks, and ComfyUI's Brownian tree is not each
row's own generator, so their draws cannot be matched): on Gaussian data, whose exact denoiser is
known, a sampler that adds the right noise ends with the data's spread; one that adds none (the
same sampler with zero noise) ends far below it."""

from __future__ import annotations

import pytest
import torch

from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.noise import NoiseSource, NoNoise, RowNoise
from inline_core.diffusion.sigma.sampling import DiscreteSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper

SPREAD = 0.5  # the data's standard deviation
STOCHASTIC = [
    "euler_ancestral",
    "dpm_2_ancestral",
    "dpmpp_2s_ancestral",
    "dpmpp_sde",
    "dpmpp_2m_sde",
    "dpmpp_2m_sde_heun",
    "dpmpp_3m_sde",
    "er_sde",
    "res_multistep_ancestral",
]


def final_spread(name: str, noise: NoiseSource) -> float:
    sampling = DiscreteSampling()
    sigmas = schedules.schedule_sigmas("karras", sampling, 48)
    start = torch.randn((4, 1, 64, 64), generator=torch.Generator().manual_seed(0))
    x = start * (SPREAD**2 + sigmas[0] ** 2) ** 0.5  # the data noised to the first level
    stepper = SigmaStepper(name, sampling, sigmas, x, noise)
    while stepper.result is None:
        point, sigma = stepper.call
        denoised = point * SPREAD**2 / (SPREAD**2 + sigma**2)  # E[x0 | x] for Gaussian data
        stepper.advance((point - denoised) / sigma)  # the epsilon that denoiser implies
    return float(stepper.result.std()) / SPREAD


@pytest.mark.parametrize("name", STOCHASTIC)
def test_a_stochastic_sampler_ends_with_the_datas_spread(name: str) -> None:
    rows = RowNoise([torch.Generator().manual_seed(10 + i) for i in range(4)])
    assert final_spread(name, rows) == pytest.approx(1.0, abs=0.1)
    assert final_spread(name, NoNoise()) < 0.85  # the check sees the noise
