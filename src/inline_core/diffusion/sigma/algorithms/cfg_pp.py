"""CFG++ samplers (Chung et al., arXiv 2406.08070), as ComfyUI's `comfy/k_diffusion/sampling.py`
runs them: the step lands on the guided clean estimate but renoises along the unconditional
one, so each call reads both (`Prediction.uncond_denoised`: the family's step hands the
unconditional output on beside the guided one). ComfyUI's `eta` and `s_noise` at their defaults."""

from __future__ import annotations

import math

import torch

from inline_core.diffusion.sigma.algorithms.two_stage import dpmpp_2s_ancestral_steps
from inline_core.diffusion.sigma.algorithms.walk import (
    Run,
    Walk,
    ancestral_step,
    neg_log,
)


def _alpha(walk: Walk, sigma: float) -> float:
    """`sigma * exp(half_log_snr)`: 1 for an epsilon model, `1 - sigma` for a flow one."""
    return 1.0 - sigma if walk.sampling.flow else 1.0


def _ancestral_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float], eta: float) -> Run:
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x = p.x
        if sigma_next == 0:
            x = p.denoised
            continue
        alpha_s, alpha_t = _alpha(walk, sigma), _alpha(walk, sigma_next)
        d = (x - alpha_s * p.uncond_denoised) / sigma  # to noise
        if alpha_s == 0:  # sigma 1 on a flow model: the ancestral step from an infinite level
            down, up = (sigma_next / alpha_t, 0.0) if not eta else (0.0, sigma_next / alpha_t)
        else:
            down, up = ancestral_step(sigma / alpha_s, sigma_next / alpha_t, eta)
        x = alpha_t * p.denoised + (alpha_t * down) * d
        if eta > 0:
            x = x + alpha_t * walk.noise(x) * up
    return x


def euler_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _ancestral_cfg_pp(walk, x, sigmas, 0.0))


def euler_ancestral_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _ancestral_cfg_pp(walk, x, sigmas, 1.0))


def dpmpp_2m_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    """DPM-Solver++(2M) stepping from the guided estimate along the unconditional history (on
    -log sigma for every prediction type, as ComfyUI's)."""
    old: torch.Tensor | None = None
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        if sigma_next == 0:
            x = p.denoised  # exp(-h) is 0: the mix and the carried x vanish
        else:
            t, t_next = neg_log(sigma), neg_log(sigma_next)
            h = t_next - t
            mix = -math.exp(-h) * p.uncond_denoised
            if old is not None:
                r = (t - neg_log(sigmas[i - 1])) / h
                mix = mix - math.expm1(-h) * (1 / (2 * r)) * (p.denoised - old)
            x = p.denoised + mix + math.exp(-h) * p.x
        old = p.uncond_denoised
    return x


def dpmpp_2s_ancestral_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from dpmpp_2s_ancestral_steps(walk, x, sigmas, cfg_pp=True))
