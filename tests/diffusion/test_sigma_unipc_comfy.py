"""The library's `uni_pc` and `uni_pc_bh2` against a line-by-line port of ComfyUI's
`comfy/extra_samplers/uni_pc.py` (`sample_unipc`: order 3, its warm-up, `lower_order_final`, no
corrector on the last step, a last sigma of 0 run to 0.001, every model read as an epsilon model
on sigma) on a toy denoiser, for an epsilon and a flow model; and against diffusers'
`UniPCMultistepScheduler(solver_order=3)` where its config says the same (an epsilon model on
Karras sigmas ending above 0). Tolerance: 2e-5 of the result's scale (float32 rounding: ComfyUI
steps in its VP space, the library on sigma)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
import torch

from inline_core.diffusion.libs import diffusers, to_floats
from inline_core.diffusion.sigma.algorithms.unipc import UniPC
from inline_core.diffusion.sigma.noise import NoNoise
from inline_core.diffusion.sigma.prediction import model_input
from inline_core.diffusion.sigma.sampling import DiscreteSampling, FlowSampling, ModelSampling
from inline_core.diffusion.sigma.stepper import SigmaStepper

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
solve = cast(Callable[[torch.Tensor, torch.Tensor], torch.Tensor], torch.linalg.solve)  # pyright: ignore[reportUnknownMemberType]


def toy(x: torch.Tensor) -> torch.Tensor:
    return 0.6 * torch.tanh(x) + 0.15 * x + 0.05


def start() -> torch.Tensor:
    return torch.randn((1, 4, 6, 6), generator=torch.Generator().manual_seed(7))


def ours(
    sampler: Any, sampling: ModelSampling, sigmas: list[float], x: torch.Tensor
) -> torch.Tensor:
    stepper = SigmaStepper(sampler, sampling, sigmas, x, NoNoise())
    while stepper.result is None:
        point, sigma = stepper.call
        stepper.advance(toy(model_input(sampling, point, sigma)))
    return stepper.result


def denoiser(sampling: ModelSampling) -> Denoiser:
    """ComfyUI's k-diffusion model of the same toy: sigma in, clean estimate out."""

    def denoise(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        s = float(sigma.reshape(-1)[0])
        return x - s * toy(model_input(sampling, x, s))

    return denoise


# ---- ComfyUI's comfy/extra_samplers/uni_pc.py, line by line (predict_x0, bh variants) ----


class SigmaConvert:
    def marginal_log_mean_coeff(self, sigma: torch.Tensor) -> torch.Tensor:
        return 0.5 * torch.log(1 / ((sigma * sigma) + 1))

    def marginal_alpha(self, t: torch.Tensor) -> torch.Tensor:
        return torch.exp(self.marginal_log_mean_coeff(t))

    def marginal_std(self, t: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(1.0 - torch.exp(2.0 * self.marginal_log_mean_coeff(t)))

    def marginal_lambda(self, t: torch.Tensor) -> torch.Tensor:
        log_mean_coeff = self.marginal_log_mean_coeff(t)
        log_std = 0.5 * torch.log(1.0 - torch.exp(2.0 * log_mean_coeff))
        return log_mean_coeff - log_std


def comfy_update(
    ns: SigmaConvert,
    model_fn: Denoiser,
    variant: str,
    x: torch.Tensor,
    model_prev_list: list[torch.Tensor],
    t_prev_list: list[torch.Tensor],
    t: torch.Tensor,
    order: int,
    use_corrector: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    t_prev_0 = t_prev_list[-1]
    lambda_prev_0 = ns.marginal_lambda(t_prev_0)
    lambda_t = ns.marginal_lambda(t)
    model_prev_0 = model_prev_list[-1]
    sigma_prev_0, sigma_t = ns.marginal_std(t_prev_0), ns.marginal_std(t)
    alpha_t = torch.exp(ns.marginal_log_mean_coeff(t))
    h = lambda_t - lambda_prev_0
    rks: list[Any] = []
    d1s: list[torch.Tensor] = []
    for i in range(1, order):
        t_prev_i = t_prev_list[-(i + 1)]
        model_prev_i = model_prev_list[-(i + 1)]
        lambda_prev_i = ns.marginal_lambda(t_prev_i)
        rk = ((lambda_prev_i - lambda_prev_0) / h)[0]
        rks.append(rk)
        d1s.append((model_prev_i - model_prev_0) / rk)
    rks.append(1.0)
    rks_t = torch.tensor(rks)
    r_rows: list[torch.Tensor] = []
    b_list: list[torch.Tensor] = []
    hh = -h[0]
    h_phi_1 = torch.expm1(hh)
    h_phi_k = h_phi_1 / hh - 1
    factorial_i = 1
    b_h = hh if variant == "bh1" else torch.expm1(hh)
    for i in range(1, order + 1):
        r_rows.append(torch.pow(rks_t, i - 1))
        b_list.append(h_phi_k * factorial_i / b_h)
        factorial_i *= i + 1
        h_phi_k = h_phi_k / hh - 1 / factorial_i
    r_mat = torch.stack(r_rows)
    b = torch.tensor(b_list)
    use_predictor = len(d1s) > 0
    d1s_t = torch.stack(d1s, dim=1) if d1s else None
    rhos_p = torch.tensor([0.5])
    if d1s and order != 2:
        rhos_p = solve(r_mat[:-1, :-1], b[:-1])
    rhos_c = torch.tensor([0.5]) if order == 1 else solve(r_mat, b)
    x_t_ = (sigma_t / sigma_prev_0) * x - (alpha_t * h_phi_1) * model_prev_0
    pred_res: Any = torch.einsum("k,bkchw->bchw", rhos_p, d1s_t) if use_predictor else 0
    x_t = x_t_ - (alpha_t * b_h) * pred_res
    model_t = None
    if use_corrector:
        model_t = model_fn(x_t, t)
        corr_res: Any = 0 if d1s_t is None else torch.einsum("k,bkchw->bchw", rhos_c[:-1], d1s_t)
        d1_t = model_t - model_prev_0
        x_t = x_t_ - (alpha_t * b_h) * (corr_res + rhos_c[-1] * d1_t)
    return x_t, model_t


def comfy_sample_unipc(
    model: Denoiser, noise: torch.Tensor, sigmas: torch.Tensor, variant: str
) -> torch.Tensor:
    timesteps = sigmas.clone()
    if sigmas[-1] == 0:
        timesteps[-1] = 0.001
    ns = SigmaConvert()
    x = noise / torch.sqrt(1.0 + timesteps[0] ** 2.0)

    def model_fn(x_vp: torch.Tensor, t: torch.Tensor) -> torch.Tensor:  # predict_eps_sigma, x0
        sigma = t.reshape(-1)[0]
        x_ve = x_vp * ((sigma**2 + 1.0) ** 0.5)
        eps = (x_ve - model(x_ve, t)) / sigma
        alpha_t, sigma_t = ns.marginal_alpha(t), ns.marginal_std(t)
        return (x_vp - sigma_t * eps) / alpha_t

    order = min(3, len(timesteps) - 2)
    steps = len(timesteps) - 1
    assert steps >= order
    model_prev_list: list[torch.Tensor] = []
    t_prev_list: list[torch.Tensor] = []
    for step_index in range(steps):
        if step_index == 0:
            vec_t = timesteps[0].expand(x.shape[0])
            model_prev_list = [model_fn(x, vec_t)]
            t_prev_list = [vec_t]
        elif step_index < order:
            init_order = step_index
            vec_t = timesteps[init_order].expand(x.shape[0])
            x, model_x = comfy_update(
                ns, model_fn, variant, x, model_prev_list, t_prev_list, vec_t, init_order, True
            )
            assert model_x is not None
            model_prev_list.append(model_x)
            t_prev_list.append(vec_t)
        else:
            extra_final_step = 1 if step_index == steps - 1 else 0
            for step in range(step_index, step_index + 1 + extra_final_step):
                vec_t = timesteps[step].expand(x.shape[0])
                step_order = min(order, steps + 1 - step)  # lower_order_final
                use_corrector = step != steps
                x, model_x = comfy_update(
                    ns,
                    model_fn,
                    variant,
                    x,
                    model_prev_list,
                    t_prev_list,
                    vec_t,
                    step_order,
                    use_corrector,
                )
                for i in range(order - 1):
                    t_prev_list[i] = t_prev_list[i + 1]
                    model_prev_list[i] = model_prev_list[i + 1]
                t_prev_list[-1] = vec_t
                if step < steps:
                    assert model_x is not None
                    model_prev_list[-1] = model_x
    return x / ns.marginal_alpha(timesteps[-1])


# ---- the tests ----


def close(a: torch.Tensor, b: torch.Tensor, tol: float = 2e-5) -> None:
    err = float((a.double() - b.double()).abs().max())
    assert err <= tol * max(1.0, float(b.abs().max())), err


def flow_sigmas(steps: int, shift: float = 3.0) -> list[float]:
    t = torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float32)
    return to_floats(shift * t / (1 + (shift - 1) * t))


def eps_sigmas(steps: int) -> list[float]:
    s = diffusers().UniPCMultistepScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", use_karras_sigmas=True
    )
    s.set_timesteps(steps)
    return to_floats(s.sigmas.to(torch.float32))[:-1] + [0.0]


NAMES = {"uni_pc": "bh1", "uni_pc_bh2": "bh2"}


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("name", list(NAMES))
@pytest.mark.parametrize("kind", ["eps", "flow"])
def test_named_unipc_is_comfyuis_sample_unipc(kind: str, name: str, steps: int) -> None:
    sampling: ModelSampling = DiscreteSampling() if kind == "eps" else FlowSampling(3.0)
    sigmas = eps_sigmas(steps) if kind == "eps" else flow_sigmas(steps)
    x = start() * (sigmas[0] if kind == "eps" else 1.0)
    theirs = comfy_sample_unipc(denoiser(sampling), x, torch.tensor(sigmas), NAMES[name])
    close(ours(name, sampling, sigmas, x), theirs)


@pytest.mark.parametrize("name", list(NAMES))
def test_named_unipc_is_comfyuis_on_a_window_ending_above_zero(name: str) -> None:
    """KSamplerAdvanced's leftover noise: the walk ends at a sigma above 0 and stays there."""
    sampling = FlowSampling(3.0)
    sigmas = flow_sigmas(10)[:7]
    theirs = comfy_sample_unipc(denoiser(sampling), start(), torch.tensor(sigmas), NAMES[name])
    close(ours(name, sampling, sigmas, start()), theirs)


@pytest.mark.parametrize("name", list(NAMES))
def test_named_unipc_is_diffusers_order_3_where_its_config_says_the_same(name: str) -> None:
    """An epsilon model on a walk ending above 0 (no 0.001 stand-in, no clean-estimate step):
    diffusers' `solver_order=3`, `lower_order_final`, is ComfyUI's order rule there."""
    s = diffusers().UniPCMultistepScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        solver_type=NAMES[name],
        solver_order=3,
        use_karras_sigmas=True,
        final_sigmas_type="sigma_min",
    )
    s.set_timesteps(8)
    sigmas = to_floats(s.sigmas.to(torch.float64))
    assert sigmas[-1] > 0
    x = start() * (sigmas[0] ** 2 + 1) ** 0.5
    sample = x / (sigmas[0] ** 2 + 1) ** 0.5
    for t in s.timesteps:
        sample = s.step(toy(sample), t, sample, return_dict=False)[0]
    # diffusers ends at sigma_min in its VP space: in k-diffusion's x, times sqrt(s^2 + 1)
    close(ours(name, DiscreteSampling(), sigmas, x), sample * (sigmas[-1] ** 2 + 1) ** 0.5)


@pytest.mark.parametrize("kind", ["eps", "flow"])
def test_the_old_order_2_render_differs(kind: str) -> None:
    """What `uni_pc` rendered before (diffusers' order 2, a flow model on its own log-SNR) is
    ten times further from ComfyUI's than the tolerance the library now holds to."""
    sampling: ModelSampling = DiscreteSampling() if kind == "eps" else FlowSampling(3.0)
    sigmas = eps_sigmas(6) if kind == "eps" else flow_sigmas(6)
    x = start() * (sigmas[0] if kind == "eps" else 1.0)
    theirs = comfy_sample_unipc(denoiser(sampling), x, torch.tensor(sigmas), "bh1")
    close(ours("uni_pc", sampling, sigmas, x), theirs)
    old = ours(UniPC("bh1", 2).algorithm, sampling, sigmas, x)
    assert float((old - theirs).abs().max()) > 10 * 2e-5 * max(1.0, float(theirs.abs().max()))
