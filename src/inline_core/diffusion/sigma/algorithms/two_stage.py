"""Two model calls per step (one on the last step, down to 0): Heun, DPM-Solver-2 and its
ancestral form, DPM-Solver++(2S) ancestral, DPM-Solver++ SDE."""

from __future__ import annotations

import math

import torch

from inline_core.diffusion.sigma.algorithms.walk import (
    FlowAncestral,
    Run,
    Walk,
    ancestral_step,
    neg_log,
)
from inline_core.diffusion.sigma.prediction import Prediction


def _log_midpoint(a: float, b: float) -> float:
    return math.exp((math.log(a) + math.log(b)) / 2)


def heun(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x, d, dt = p.x, p.derivative, sigma_next - sigma
        if sigma_next == 0:
            x = x + d * dt
            continue
        p2 = yield x + d * dt, sigma_next
        x = x + (d + p2.derivative) / 2 * dt
    return x


def _dpm2_to(walk: Walk, p_x: torch.Tensor, d: torch.Tensor, sigma: float, target: float) -> Run:
    """DPM-Solver-2 from `sigma` to `target` through their log midpoint."""
    mid = _log_midpoint(sigma, target)
    p2 = yield p_x + d * (mid - sigma), mid
    return p_x + p2.derivative * (target - sigma)


def dpm_2(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        if sigma_next == 0:
            x = p.x + p.derivative * (sigma_next - sigma)
        else:
            x = yield from _dpm2_to(walk, p.x, p.derivative, sigma, sigma_next)
    return x


def dpm_2_ancestral(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        if walk.sampling.flow:
            step = FlowAncestral.of(sigma, sigma_next)
            down, scale, up = step.down, step.scale, step.renoise
        else:
            (down, up), scale = ancestral_step(sigma, sigma_next), 1.0
        if down == 0:
            x = p.x + p.derivative * (down - sigma)
            continue
        x = yield from _dpm2_to(walk, p.x, p.derivative, sigma, down)
        x = scale * x + walk.noise(x) * up if walk.sampling.flow else x + walk.noise(x) * up
    return x


def dpmpp_2s_ancestral(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from dpmpp_2s_ancestral_steps(walk, x, sigmas, cfg_pp=False))


def dpmpp_2s_ancestral_steps(
    walk: Walk, x: torch.Tensor, sigmas: list[float], *, cfg_pp: bool
) -> Run:
    """DPM-Solver++(2S) ancestral (ComfyUI's `_RF` form on a flow model). `cfg_pp`: its CFG++
    form, stepping on the unconditional estimate and adding the guidance vector after each step
    (scaled by alpha on a flow model)."""
    flow = walk.sampling.flow

    def estimate(p: Prediction) -> torch.Tensor:
        return p.uncond_denoised if cfg_pp else p.denoised

    def slope(p: Prediction) -> torch.Tensor:
        return (p.x - p.uncond_denoised) / p.sigma if cfg_pp else p.derivative

    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x = p.x
        guidance = p.denoised - p.uncond_denoised if cfg_pp else None
        if flow:
            step = FlowAncestral.of(sigma, sigma_next)
            down = step.down
            if sigma_next == 0:
                x = x + slope(p) * (down - sigma)
            else:
                if sigma == 1.0:
                    sigma_s = 0.9999
                else:
                    lam, lam_down = (math.log((1 - s) / s) for s in (sigma, down))
                    sigma_s = 1 / (math.exp(lam + (lam_down - lam) / 2) + 1)
                ratio = sigma_s / sigma
                p2 = yield ratio * x + (1 - ratio) * estimate(p), sigma_s
                ratio = down / sigma
                x = ratio * x + (1 - ratio) * estimate(p2)
                x = step.scale * x + walk.noise(x) * step.renoise
            if guidance is not None:
                x = x + (1 - sigma_next) * guidance
            continue
        down, up = ancestral_step(sigma, sigma_next)
        if down == 0:
            x = x + slope(p) * (down - sigma)
        else:
            t, t_next = neg_log(sigma), neg_log(down)
            h = t_next - t
            sigma_s = math.exp(-(t + h / 2))
            p2 = yield (sigma_s / sigma) * x - math.expm1(-h / 2) * estimate(p), sigma_s
            x = (down / sigma) * x - math.expm1(-h) * estimate(p2)
        if sigma_next > 0:
            x = x + walk.noise(x) * up
        if guidance is not None:
            x = x + guidance
    return x


def dpmpp_sde(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    """DPM-Solver++ SDE (eta 1, r 1/2). ComfyUI draws its two increments from one Brownian tree
    (nested intervals, so they correlate); here each row's Brownian path is drawn the same way,
    as a bridge: the second increment contains the first."""
    sampling = walk.sampling
    sigmas = sampling.first_sigma_for_snr(sigmas)
    r, fac = 0.5, 1.0
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x = p.x
        if sigma_next == 0:
            x = p.denoised
            continue
        lam_s, lam_t = sampling.half_log_snr(sigma), sampling.half_log_snr(sigma_next)
        h = lam_t - lam_s
        lam_s1 = lam_s + r * h
        sigma_s1 = sampling.sigma_at_half_log_snr(lam_s1)
        alpha_s = sigma * math.exp(lam_s)
        alpha_s1 = sigma_s1 * math.exp(lam_s1)
        alpha_t = sigma_next * math.exp(lam_t)
        first = walk.noise(x)  # W(sigma_s1) - W(sigma), normalised
        rest = walk.noise(x)
        near, far = abs(sigma - sigma_s1), abs(sigma - sigma_next)
        whole = (first * near**0.5 + rest * (far - near) ** 0.5) / far**0.5
        down, up = ancestral_step(math.exp(-lam_s), math.exp(-lam_s1))
        h_ = -math.log(down) - lam_s
        x_2 = (alpha_s1 / alpha_s) * math.exp(-h_) * x - alpha_s1 * math.expm1(-h_) * p.denoised
        x_2 = x_2 + alpha_s1 * first * up
        p2 = yield x_2, sigma_s1
        down, up = ancestral_step(math.exp(-lam_s), math.exp(-lam_t))
        h_ = -math.log(down) - lam_s
        mixed = (1 - fac) * p.denoised + fac * p2.denoised
        x = (alpha_t / alpha_s) * math.exp(-h_) * x - alpha_t * math.expm1(-h_) * mixed
        x = x + alpha_t * whole * up
    return x
