"""The CFG++ samplers (`_cfg_pp`) against a reference ported line by line from ComfyUI's
`comfy/k_diffusion/sampling.py` (sample_euler_ancestral_cfg_pp, sample_euler_cfg_pp,
sample_dpmpp_2m_cfg_pp, sample_dpmpp_2s_ancestral_cfg_pp and its `_RF` form, res_multistep with
cfg_pp), on a toy guided denoiser: each reference's model call returns the guided clean estimate
and records the unconditional one, as ComfyUI's post-CFG hook does. Ancestral ones draw their
noise from the same seeded generator in the same order, so every comparison is exact to float
rounding (no statistics)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from inline_core.diffusion.sigma import schedules
from inline_core.diffusion.sigma.noise import RowNoise
from inline_core.diffusion.sigma.prediction import MissingUncond
from inline_core.diffusion.sigma.sampling import DiscreteSampling, FlowSampling, ModelSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS

CFG = 4.0
Tensor = torch.Tensor


def cond_output(x: Tensor, sigma: float) -> Tensor:
    return torch.tanh(x) * 0.6 + 0.1 * sigma


def uncond_output(x: Tensor, sigma: float) -> Tensor:
    return torch.sin(x) * 0.4 - 0.05


def guided_output(x: Tensor, sigma: float) -> Tensor:
    u = uncond_output(x, sigma)
    return u + CFG * (cond_output(x, sigma) - u)


class Reference:
    """ComfyUI's model wrapper for these samplers: `model(x, sigma)` is the guided denoised (eps or
    flow: `x - sigma * output`), and `uncond_denoised` the last call's unconditional one."""

    def __init__(self) -> None:
        self.uncond_denoised: Tensor | None = None

    def __call__(self, x: Tensor, sigma: Tensor) -> Tensor:
        s = float(sigma)
        self.uncond_denoised = x - uncond_output(x, s) * sigma
        return x - guided_output(x, s) * sigma


def to_d(x: Tensor, sigma: Tensor, denoised: Tensor) -> Tensor:
    return (x - denoised) / sigma


def get_ancestral_step(
    sigma_from: Tensor, sigma_to: Tensor, eta: float = 1.0
) -> tuple[Tensor, Tensor]:
    if not eta:
        return sigma_to, torch.tensor(0.0, dtype=torch.float64)
    sigma_up: Tensor = min(
        sigma_to, eta * (sigma_to**2 * (sigma_from**2 - sigma_to**2) / sigma_from**2) ** 0.5
    )
    sigma_down = (sigma_to**2 - sigma_up**2) ** 0.5
    return sigma_down, sigma_up


def half_log_snr(sigma: Tensor, flow: bool) -> Tensor:
    return sigma.logit().neg() if flow else sigma.log().neg()


Noise = Callable[[Tensor], Tensor]


def ref_euler_ancestral_cfg_pp(
    x: Tensor, sigmas: Tensor, flow: bool, noise: Noise, eta: float = 1.0, s_noise: float = 1.0
) -> Tensor:
    model = Reference()
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        uncond_denoised = model.uncond_denoised
        assert uncond_denoised is not None
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            alpha_s = sigmas[i] * half_log_snr(sigmas[i], flow).exp()
            alpha_t = sigmas[i + 1] * half_log_snr(sigmas[i + 1], flow).exp()
            d = to_d(x, sigmas[i], alpha_s * uncond_denoised)
            sigma_down, sigma_up = get_ancestral_step(
                sigmas[i] / alpha_s, sigmas[i + 1] / alpha_t, eta=eta
            )
            sigma_down = alpha_t * sigma_down
            x = alpha_t * denoised + sigma_down * d
            if eta > 0 and s_noise > 0:
                x = x + alpha_t * noise(x) * s_noise * sigma_up
    return x


def ref_euler_cfg_pp(x: Tensor, sigmas: Tensor, flow: bool, noise: Noise) -> Tensor:
    return ref_euler_ancestral_cfg_pp(x, sigmas, flow, noise, eta=0.0, s_noise=0.0)


def ref_dpmpp_2m_cfg_pp(x: Tensor, sigmas: Tensor, flow: bool, noise: Noise) -> Tensor:
    model = Reference()

    def t_fn(sigma: Tensor) -> Tensor:
        return sigma.log().neg()

    old_uncond_denoised: Tensor | None = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        uncond_denoised = model.uncond_denoised
        assert uncond_denoised is not None
        t, t_next = t_fn(sigmas[i]), t_fn(sigmas[i + 1])
        h = t_next - t
        if old_uncond_denoised is None or sigmas[i + 1] == 0:
            denoised_mix = -torch.exp(-h) * uncond_denoised
        else:
            h_last = t - t_fn(sigmas[i - 1])
            r = h_last / h
            denoised_mix = -torch.exp(-h) * uncond_denoised - torch.expm1(-h) * (1 / (2 * r)) * (
                denoised - old_uncond_denoised
            )
        x = denoised + denoised_mix + torch.exp(-h) * x
        old_uncond_denoised = uncond_denoised
    return x


def ref_dpmpp_2s_ancestral_cfg_pp(x: Tensor, sigmas: Tensor, flow: bool, noise: Noise) -> Tensor:
    if flow:
        return ref_dpmpp_2s_ancestral_rf_cfg_pp(x, sigmas, noise)
    model = Reference()

    def sigma_fn(t: Tensor) -> Tensor:
        return t.neg().exp()

    def t_fn(sigma: Tensor) -> Tensor:
        return sigma.log().neg()

    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        uncond_denoised = model.uncond_denoised
        assert uncond_denoised is not None
        guidance_vector = denoised - uncond_denoised
        sigma_down, sigma_up = get_ancestral_step(sigmas[i], sigmas[i + 1], eta=1.0)
        if sigma_down == 0:
            d = to_d(x, sigmas[i], uncond_denoised)
            dt = sigma_down - sigmas[i]
            x = x + d * dt
        else:
            t, t_next = t_fn(sigmas[i]), t_fn(sigma_down)
            r = 1 / 2
            h = t_next - t
            s = t + r * h
            x_2 = (sigma_fn(s) / sigma_fn(t)) * x - (-h * r).expm1() * uncond_denoised
            _ = model(x_2, sigma_fn(s))
            uncond_denoised_2 = model.uncond_denoised
            assert uncond_denoised_2 is not None
            x = (sigma_fn(t_next) / sigma_fn(t)) * x - (-h).expm1() * uncond_denoised_2
        if sigmas[i + 1] > 0:
            x = x + noise(x) * sigma_up
        x += guidance_vector
    return x


def ref_dpmpp_2s_ancestral_rf_cfg_pp(x: Tensor, sigmas: Tensor, noise: Noise) -> Tensor:
    model = Reference()
    eta = 1.0

    def sigma_fn(lbda: Tensor) -> Tensor:
        return (lbda.exp() + 1) ** -1

    def lambda_fn(sigma: Tensor) -> Tensor:
        return ((1 - sigma) / sigma).log()

    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        uncond_denoised = model.uncond_denoised
        assert uncond_denoised is not None
        guidance_vector = denoised - uncond_denoised
        downstep_ratio = 1 + (sigmas[i + 1] / sigmas[i] - 1) * eta
        sigma_down = sigmas[i + 1] * downstep_ratio
        alpha_ip1 = 1 - sigmas[i + 1]
        alpha_down = 1 - sigma_down
        renoise_coeff = (sigmas[i + 1] ** 2 - sigma_down**2 * alpha_ip1**2 / alpha_down**2) ** 0.5
        if sigmas[i + 1] == 0:
            d = to_d(x, sigmas[i], uncond_denoised)
            dt = sigma_down - sigmas[i]
            x = x + d * dt
        else:
            if sigmas[i] == 1.0:
                sigma_s = torch.tensor(0.9999, dtype=torch.float64)
            else:
                t_i, t_down = lambda_fn(sigmas[i]), lambda_fn(sigma_down)
                r = 1 / 2
                h = t_down - t_i
                s = t_i + r * h
                sigma_s = sigma_fn(s)
            sigma_s_i_ratio = sigma_s / sigmas[i]
            u = sigma_s_i_ratio * x + (1 - sigma_s_i_ratio) * uncond_denoised
            _ = model(u, sigma_s)
            uncond_d_i = model.uncond_denoised
            assert uncond_d_i is not None
            sigma_down_i_ratio = sigma_down / sigmas[i]
            x = sigma_down_i_ratio * x + (1 - sigma_down_i_ratio) * uncond_d_i
        if sigmas[i + 1] > 0 and eta > 0:
            x = (alpha_ip1 / alpha_down) * x + noise(x) * renoise_coeff
        x += (1 - sigmas[i + 1]) * guidance_vector
    return x


def ref_res_multistep(
    x: Tensor,
    sigmas: Tensor,
    flow: bool,
    noise: Noise,
    eta: float = 0.0,
    model: Reference | None = None,
) -> Tensor:
    """ComfyUI's res_multistep with cfg_pp; a `model` whose unconditional estimate is its guided
    one makes it ComfyUI's plain res_multistep (each cfg_pp term then equals the plain one)."""
    model = Reference() if model is None else model

    def sigma_fn(t: Tensor) -> Tensor:
        return t.neg().exp()

    def t_fn(sigma: Tensor) -> Tensor:
        return sigma.log().neg()

    def phi1_fn(t: Tensor) -> Tensor:
        return torch.expm1(t) / t

    def phi2_fn(t: Tensor) -> Tensor:
        return (phi1_fn(t) - 1.0) / t

    old_sigma_down: Tensor | None = None
    old_denoised: Tensor | None = None
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        uncond_denoised = model.uncond_denoised
        assert uncond_denoised is not None
        sigma_down, sigma_up = get_ancestral_step(sigmas[i], sigmas[i + 1], eta=eta)
        if sigma_down == 0 or old_denoised is None:
            d = to_d(x, sigmas[i], uncond_denoised)
            x = denoised + d * sigma_down
        else:
            assert old_sigma_down is not None
            t, t_old = t_fn(sigmas[i]), t_fn(old_sigma_down)
            t_next, t_prev = t_fn(sigma_down), t_fn(sigmas[i - 1])
            h = t_next - t
            c2 = (t_prev - t_old) / h
            phi1_val, phi2_val = phi1_fn(-h), phi2_fn(-h)
            b1 = torch.nan_to_num(phi1_val - phi2_val / c2, nan=0.0)
            b2 = torch.nan_to_num(phi2_val / c2, nan=0.0)
            x = x + (denoised - uncond_denoised)
            x = sigma_fn(h) * x + h * (b1 * uncond_denoised + b2 * old_denoised)
        if sigmas[i + 1] > 0 and sigma_up > 0:  # ComfyUI adds noise * 0 when sigma_up is 0
            x = x + noise(x) * sigma_up
        old_denoised = uncond_denoised
        old_sigma_down = sigma_down
    return x


def ref_res_multistep_ancestral(x: Tensor, sigmas: Tensor, flow: bool, noise: Noise) -> Tensor:
    return ref_res_multistep(x, sigmas, flow, noise, eta=1.0)


REFERENCES: dict[str, Callable[[Tensor, Tensor, bool, Noise], Tensor]] = {
    "euler_cfg_pp": ref_euler_cfg_pp,
    "euler_ancestral_cfg_pp": ref_euler_ancestral_cfg_pp,
    "dpmpp_2m_cfg_pp": ref_dpmpp_2m_cfg_pp,
    "dpmpp_2s_ancestral_cfg_pp": ref_dpmpp_2s_ancestral_cfg_pp,
    "res_multistep_cfg_pp": ref_res_multistep,
    "res_multistep_ancestral_cfg_pp": ref_res_multistep_ancestral,
}
SAMPLINGS = [DiscreteSampling(), FlowSampling(3.0)]


def ours(name: str, sampling: ModelSampling, sigmas: list[float], x: Tensor) -> Tensor:
    noise = RowNoise([torch.Generator().manual_seed(5)])
    stepper = SigmaStepper(name, sampling, sigmas, x, noise)
    while stepper.result is None:
        point, sigma = stepper.call
        stepper.advance(guided_output(point, sigma), uncond=uncond_output(point, sigma))
    return stepper.result


def test_every_cfg_pp_sampler_has_a_reference() -> None:
    assert set(REFERENCES) == set(CFG_PP_SAMPLERS)


@pytest.mark.parametrize("name", CFG_PP_SAMPLERS)
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["eps", "flow"])
def test_a_cfg_pp_sampler_steps_as_comfyuis_does(name: str, sampling: ModelSampling) -> None:
    sigmas = schedules.schedule_sigmas("simple" if sampling.flow else "karras", sampling, 6)
    x = torch.randn((1, 2, 4, 4), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x = x * (1.0 if sampling.flow else sigmas[0])
    generator = torch.Generator().manual_seed(5)

    def noise(like: Tensor) -> Tensor:
        drawn = torch.randn((1, *like.shape[1:]), generator=generator, dtype=torch.float32)
        return drawn.to(like.dtype)

    reference = REFERENCES[name](x, torch.tensor(sigmas, dtype=torch.float64), sampling.flow, noise)
    got = ours(name, sampling, sigmas, x.to(torch.float32))
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, reference.to(torch.float32), atol=2e-5, rtol=2e-5)


def test_cfg_pp_differs_from_plain_cfg() -> None:
    """The unconditional estimate is read: CFG++ is not the base sampler under another name."""
    sampling = DiscreteSampling()
    sigmas = schedules.schedule_sigmas("karras", sampling, 6)
    x = torch.randn((1, 2, 4, 4), generator=torch.Generator().manual_seed(3)) * sigmas[0]
    plain = SigmaStepper("euler", sampling, sigmas, x, RowNoise([torch.Generator()]))
    while plain.result is None:
        plain.advance(guided_output(*plain.call))
    assert plain.result is not None
    assert not torch.allclose(ours("euler_cfg_pp", sampling, sigmas, x), plain.result, atol=1e-3)


@pytest.mark.parametrize("name", CFG_PP_SAMPLERS)
def test_a_cfg_pp_sampler_without_the_unconditional_output_is_refused(name: str) -> None:
    sampling = FlowSampling(3.0)
    sigmas = schedules.schedule_sigmas("simple", sampling, 4)
    stepper = SigmaStepper(
        name, sampling, sigmas, torch.zeros(1, 2, 2, 2), RowNoise([torch.Generator()])
    )
    with pytest.raises(MissingUncond, match="unconditional prediction"):
        while stepper.result is None:
            stepper.advance(guided_output(*stepper.call))
