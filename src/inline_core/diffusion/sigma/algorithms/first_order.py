"""One model call per step: Euler, Euler ancestral, LCM."""

from __future__ import annotations

import torch

from inline_core.diffusion.sigma.algorithms.walk import FlowAncestral, Run, Walk, ancestral_step


def euler(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    """Karras et al.'s Algorithm 2 without churn: `x + d * (sigma_next - sigma)`."""
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x = p.x + p.derivative * (sigma_next - sigma)
    return x


def euler_ancestral(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    """Euler to sigma_down, then noise back up to the next level (eta 1)."""
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x = p.x
        if walk.sampling.flow:
            if sigma_next == 0:
                x = p.denoised
                continue
            step = FlowAncestral.of(sigma, sigma_next)
            ratio = step.down / sigma
            x = ratio * x + (1 - ratio) * p.denoised
            x = step.scale * x + walk.noise(x) * step.renoise
            continue
        down, up = ancestral_step(sigma, sigma_next)
        if down == 0:
            x = p.denoised
        else:
            x = x + p.derivative * (down - sigma) + walk.noise(x) * up
    return x


def lcm(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    """Latent consistency: jump to the clean estimate, noise it to the next level."""
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        x = p.denoised
        if sigma_next > 0:
            x = walk.sampling.noise_scaling(sigma_next, walk.noise(x), x)
    return x
