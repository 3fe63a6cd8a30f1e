"""`res_multistep`, `res_multistep_ancestral` and `er_sde`, which diffusers lacks, against their
published formulas: a reference ported line by line from ComfyUI's `comfy/k_diffusion/sampling.py`
(`res_multistep` with eta 0 and 1, `sample_er_sde`: ER-SDE-Solver-3, arXiv 2309.06169) on a toy
denoiser, the noise drawn from the same seeded generator in the same order, so the comparison is
exact to float rounding. Then a known answer: on Gaussian data the exact denoiser is known and the
probability-flow ODE has a closed-form end point, which `res_multistep` reaches at second order."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.noise import NoNoise, RowNoise
from inline_core.diffusion.sigma.sampling import DiscreteSampling, FlowSampling, ModelSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper
from tests.diffusion.test_sigma_cfg_pp import Noise, Reference, guided_output, ref_res_multistep

Tensor = torch.Tensor
SAMPLINGS = [DiscreteSampling(), FlowSampling(3.0)]


class OneOutput(Reference):
    """A model without guidance: its unconditional estimate is its only one."""

    def __call__(self, x: Tensor, sigma: Tensor) -> Tensor:
        denoised = x - guided_output(x, float(sigma)) * sigma
        self.uncond_denoised = denoised
        return denoised


def er_noise_scaler(x: Tensor) -> Tensor:
    return x * ((x**0.3).exp() + 10.0)


def ref_er_sde(x: Tensor, sigmas: Tensor, flow: bool, noise: Noise) -> Tensor:
    """ComfyUI's `sample_er_sde` (max_stage 3, s_noise 1); `sigmas` start below a flow model's 1,
    so its `offset_first_sigma_for_snr` leaves them as they are."""
    model = OneOutput()
    points = torch.arange(0, 200.0, dtype=torch.float64)
    half_log_snrs = sigmas.logit().neg() if flow else sigmas.log().neg()
    er_lambdas = half_log_snrs.neg().exp()  # sigma / alpha
    old_denoised: Tensor | None = None
    old_denoised_d: Tensor | None = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        stage_used = min(3, i + 1)
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            er_lambda_s, er_lambda_t = er_lambdas[i], er_lambdas[i + 1]
            alpha_s = sigmas[i] / er_lambda_s
            alpha_t = sigmas[i + 1] / er_lambda_t
            r_alpha = alpha_t / alpha_s
            r = er_noise_scaler(er_lambda_t) / er_noise_scaler(er_lambda_s)
            x = r_alpha * r * x + alpha_t * (1 - r) * denoised
            if stage_used >= 2:
                assert old_denoised is not None
                dt = er_lambda_t - er_lambda_s
                lambda_step_size = -dt / 200.0
                lambda_pos = er_lambda_t + points * lambda_step_size
                scaled_pos = er_noise_scaler(lambda_pos)
                s = torch.sum(1 / scaled_pos) * lambda_step_size
                denoised_d = (denoised - old_denoised) / (er_lambda_s - er_lambdas[i - 1])
                x = x + alpha_t * (dt + s * er_noise_scaler(er_lambda_t)) * denoised_d
                if stage_used >= 3:
                    assert old_denoised_d is not None
                    s_u = torch.sum((lambda_pos - er_lambda_s) / scaled_pos) * lambda_step_size
                    denoised_u = (denoised_d - old_denoised_d) / (
                        (er_lambda_s - er_lambdas[i - 2]) / 2
                    )
                    x = (
                        x
                        + alpha_t * ((dt**2) / 2 + s_u * er_noise_scaler(er_lambda_t)) * denoised_u
                    )
                old_denoised_d = denoised_d
            spread = (er_lambda_t**2 - er_lambda_s**2 * r**2).sqrt().nan_to_num(nan=0.0)
            x = x + alpha_t * noise(x) * spread
        old_denoised = denoised
    return x


def ref_res(eta: float) -> Callable[[Tensor, Tensor, bool, Noise], Tensor]:
    def run(x: Tensor, sigmas: Tensor, flow: bool, noise: Noise) -> Tensor:
        return ref_res_multistep(x, sigmas, flow, noise, eta=eta, model=OneOutput())

    return run


REFERENCES = {
    "res_multistep": ref_res(0.0),
    "res_multistep_ancestral": ref_res(1.0),
    "er_sde": ref_er_sde,
}


def sigmas_for(sampling: ModelSampling, steps: int) -> list[float]:
    if sampling.flow:  # from below 1: the reference need not port the first sigma's offset
        return schedules.schedule_sigmas("simple", sampling, steps + 1)[1:]
    return schedules.schedule_sigmas("karras", sampling, steps)


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["eps", "flow"])
def test_the_sampler_steps_as_comfyuis_does(name: str, sampling: ModelSampling) -> None:
    sigmas = sigmas_for(sampling, 7)
    x = torch.randn((1, 2, 4, 4), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x = x * sigmas[0]
    generator = torch.Generator().manual_seed(5)

    def noise(like: Tensor) -> Tensor:
        drawn = torch.randn((1, *like.shape[1:]), generator=generator, dtype=torch.float32)
        return drawn.to(like.dtype)

    reference = REFERENCES[name](x, torch.tensor(sigmas, dtype=torch.float64), sampling.flow, noise)
    stepper = SigmaStepper(
        name, sampling, sigmas, x.to(torch.float32), RowNoise([torch.Generator().manual_seed(5)])
    )
    while stepper.result is None:
        stepper.advance(guided_output(*stepper.call))
    assert torch.isfinite(stepper.result).all()
    # The library steps in float32 (the reference in float64); the toy outputs reach tens, and
    # x - sigma * output cancels at sigma_max, so the bound is relative to the result's size.
    scale = float(reference.abs().max())
    torch.testing.assert_close(
        stepper.result, reference.to(torch.float32), atol=1e-4 * scale, rtol=1e-4
    )


def test_the_stochastic_ones_draw_noise_and_res_multistep_draws_none() -> None:
    """The reference comparison sees the noise: without it the SDE samplers land elsewhere."""
    sampling = DiscreteSampling()
    sigmas = sigmas_for(sampling, 7)
    x = torch.randn((1, 2, 4, 4), generator=torch.Generator().manual_seed(3)) * sigmas[0]

    def run(name: str, seeded: bool) -> Tensor:
        noise = RowNoise([torch.Generator().manual_seed(5)]) if seeded else NoNoise()
        stepper = SigmaStepper(name, sampling, sigmas, x, noise)
        while stepper.result is None:
            stepper.advance(guided_output(*stepper.call))
        return stepper.result

    for name in ("res_multistep_ancestral", "er_sde"):
        assert not torch.allclose(run(name, True), run(name, False), atol=1e-3)
    torch.testing.assert_close(run("res_multistep", True), run("res_multistep", False))


SPREAD = 0.5  # the Gaussian data's standard deviation


def gaussian_end_error(name: str, steps: int) -> float:
    """`name` on N(0, SPREAD^2) data, whose denoiser E[x0 | x] is x s^2 / (s^2 + sigma^2):
    the probability-flow ODE carries x from sigma_max to sigma_min as sqrt(s^2 + sigma^2) scales,
    and the last step to 0 is that denoiser (as every sampler ends)."""
    sampling = DiscreteSampling()
    sigmas = schedules.schedule_sigmas("karras", sampling, steps)
    x = torch.randn((1, 1, 8, 8), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x = x * sigmas[0]
    at_min = x * math.sqrt((SPREAD**2 + sigmas[-2] ** 2) / (SPREAD**2 + sigmas[0] ** 2))
    exact = at_min * SPREAD**2 / (SPREAD**2 + sigmas[-2] ** 2)
    stepper = SigmaStepper(name, sampling, sigmas, x, NoNoise())
    while stepper.result is None:
        point, sigma = stepper.call
        denoised = point * SPREAD**2 / (SPREAD**2 + sigma**2)
        stepper.advance((point - denoised) / sigma)  # the epsilon that denoiser implies
    return float((stepper.result - exact).abs().max())


def test_res_multistep_reaches_the_gaussian_odes_end_at_second_order() -> None:
    coarse, fine = gaussian_end_error("res_multistep", 40), gaussian_end_error("res_multistep", 80)
    assert fine < 0.005
    assert coarse / fine > 3.5  # halving the step quarters a second-order error (about 4.3)
    # Euler, first order, only halves it: the check tells the orders apart.
    euler = gaussian_end_error("euler", 40) / gaussian_end_error("euler", 80)
    assert 1.5 < euler < 2.5
