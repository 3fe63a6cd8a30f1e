"""ComfyUI's zero-terminal-SNR table (`ModelSamplingDiscrete(zsnr=True)`): diffusers'
`rescale_zero_terminal_snr` (the same rescale of Lin et al., arXiv 2305.08891, done on the
betas) gives the same sigmas but the last, which ComfyUI keeps finite at alpha bar 4.897e-8."""

from __future__ import annotations

import math

import pytest
import torch

from inline_core.diffusion.sigma.sampling import DiscreteSampling, discrete_prediction


def test_zsnr_table_is_diffusers_rescale_with_comfyuis_last_sigma() -> None:
    from diffusers.schedulers.scheduling_euler_discrete import rescale_zero_terminal_snr

    table = DiscreteSampling("v", zsnr=True).sigmas
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float64) ** 2
    alpha_bar = torch.cumprod(1 - rescale_zero_terminal_snr(betas), 0)
    theirs = ((1 - alpha_bar) / alpha_bar) ** 0.5
    assert torch.allclose(table[:-1].double(), theirs[:-1], rtol=1e-5)
    assert float(theirs[-1]) == math.inf  # diffusers' own table ends at zero SNR exactly
    assert float(table[-1]) == pytest.approx(4518.7637)  # sqrt((1 - a) / a), a = 4.897e-8
    # The first sigma keeps its level; every later one is raised (less signal at every step).
    plain = DiscreteSampling("v").sigmas
    assert float(table[0]) == pytest.approx(float(plain[0]), rel=1e-6)
    assert bool((table[1:] > plain[1:]).all())


def test_prediction_names_are_diffusers_and_comfyuis() -> None:
    names = ("epsilon", "eps", "v_prediction")
    assert [discrete_prediction(n) for n in names] == ["eps", "eps", "v"]
    for name in ("lcm", "x0", "sample"):
        with pytest.raises(ValueError, match=repr(name)):
            discrete_prediction(name)
