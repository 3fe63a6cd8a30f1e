"""Stochastic multistep samplers in log-SNR: DPM-Solver++(2M) SDE, DPM-Solver++(3M) SDE and
ER-SDE. Their noise is one draw per step over disjoint intervals, which is what ComfyUI's Brownian
tree gives too (in distribution: the draws are each row's own, not the tree's)."""

from __future__ import annotations

import math

import torch

from inline_core.diffusion.sigma.algorithms.walk import Run, Walk


def _multistep_sde(
    walk: Walk, x: torch.Tensor, sigmas: list[float], order: int, heun: bool = False
) -> Run:
    sampling = walk.sampling
    sigmas = sampling.first_sigma_for_snr(sigmas)
    eta = 1.0
    d1: torch.Tensor | None = None
    d2: torch.Tensor | None = None
    h1: float | None = None
    h2: float | None = None
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        h: float | None = None
        if sigma_next == 0:
            x = p.denoised
        else:
            lam_s, lam_t = sampling.half_log_snr(sigma), sampling.half_log_snr(sigma_next)
            h = lam_t - lam_s
            h_eta = h * (eta + 1)
            alpha_t = sigma_next * math.exp(lam_t)
            x = (sigma_next / sigma) * math.exp(-h * eta) * p.x
            x = x + alpha_t * -math.expm1(-h_eta) * p.denoised
            phi_2 = math.expm1(-h_eta) / h_eta + 1
            if order == 3 and h2 is not None and h1 is not None and d1 is not None:
                assert d2 is not None
                r0, r1 = h1 / h, h2 / h
                e0 = (p.denoised - d1) / r0
                e1 = (d1 - d2) / r1
                first = e0 + (e0 - e1) * r0 / (r0 + r1)
                second = (e0 - e1) / (r0 + r1)
                phi_3 = phi_2 / h_eta - 0.5
                x = x + (alpha_t * phi_2) * first - (alpha_t * phi_3) * second
            elif h1 is not None and d1 is not None:
                if order == 2 and heun:
                    scale = -math.expm1(-h_eta) / -h_eta + 1
                    x = x + alpha_t * scale * (h / h1) * (p.denoised - d1)
                elif order == 2:  # the midpoint form
                    x = x + 0.5 * alpha_t * -math.expm1(-h_eta) * (h / h1) * (p.denoised - d1)
                else:
                    x = x + (alpha_t * phi_2) * ((p.denoised - d1) / (h1 / h))
            x = x + walk.noise(x) * sigma_next * (-math.expm1(-2 * h * eta)) ** 0.5
        d1, d2 = p.denoised, d1
        h1, h2 = (h, h1) if order == 3 else (h if h is not None else h1, None)
    return x


def dpmpp_2m_sde(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _multistep_sde(walk, x, sigmas, 2))


def dpmpp_2m_sde_heun(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _multistep_sde(walk, x, sigmas, 2, heun=True))


def dpmpp_3m_sde(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _multistep_sde(walk, x, sigmas, 3))


def _er_scaler(x: float) -> float:
    return x * (math.exp(x**0.3) + 10.0)


def er_sde(walk: Walk, x: torch.Tensor, sigmas: list[float], max_stage: int = 3) -> Run:
    """ER-SDE-Solver-3 (arXiv 2309.06169), ComfyUI's defaults: its noise scaler and 200-point
    integrals."""
    sampling = walk.sampling
    sigmas = sampling.first_sigma_for_snr(sigmas)
    lams = [math.exp(-sampling.half_log_snr(s)) for s in sigmas]  # sigma / alpha
    points = 200
    old: torch.Tensor | None = None
    old_d: torch.Tensor | None = None
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        stage = min(max_stage, i + 1)
        if sigma_next == 0:
            x = p.denoised
        else:
            lam_s, lam_t = lams[i], lams[i + 1]
            alpha_s, alpha_t = sigma / lam_s, sigma_next / lam_t
            r = _er_scaler(lam_t) / _er_scaler(lam_s)
            x = (alpha_t / alpha_s) * r * p.x + alpha_t * (1 - r) * p.denoised
            if stage >= 2 and old is not None:
                dt = lam_t - lam_s
                step = -dt / points
                pos = [lam_t + k * step for k in range(points)]
                s = sum(1 / _er_scaler(q) for q in pos) * step
                derivative = (p.denoised - old) / (lam_s - lams[i - 1])
                x = x + alpha_t * (dt + s * _er_scaler(lam_t)) * derivative
                if stage >= 3 and old_d is not None:
                    s_u = sum((q - lam_s) / _er_scaler(q) for q in pos) * step
                    second = (derivative - old_d) / ((lam_s - lams[i - 2]) / 2)
                    x = x + alpha_t * ((dt**2) / 2 + s_u * _er_scaler(lam_t)) * second
                old_d = derivative
            spread = lam_t**2 - lam_s**2 * r**2
            x = x + alpha_t * walk.noise(x) * (spread**0.5 if spread > 0 else 0.0)
        old = p.denoised
    return x
