"""One model call per step, reusing earlier outputs: LMS, DPM-Solver++(2M), iPNDM,
res_multistep. Their history lives in the generator's frame, so each request keeps its own."""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.polynomial import polynomial

from inline_core.diffusion.sigma.algorithms.walk import Run, Walk, ancestral_step, neg_log


def lms_coefficient(order: int, sigmas: list[float], i: int, j: int) -> float:
    """The integral over [sigma_i, sigma_i+1] of the Lagrange basis polynomial j on the last
    `order` sigmas (k-diffusion integrates it numerically; a polynomial integrates exactly)."""
    basis = np.array([1.0])
    for k in range(order):
        if k != j:
            basis = polynomial.polymul(basis, np.array([-sigmas[i - k], 1.0]))
            basis = basis / (sigmas[i - j] - sigmas[i - k])
    antiderivative = polynomial.polyint(basis)
    return float(
        polynomial.polyval(sigmas[i + 1], antiderivative)
        - polynomial.polyval(sigmas[i], antiderivative)
    )


def lms(walk: Walk, x: torch.Tensor, sigmas: list[float], order: int = 4) -> Run:
    ds: list[torch.Tensor] = []
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        ds = [*ds, p.derivative][-order:]
        if sigma_next == 0:
            x = p.denoised
            continue
        current = min(i + 1, order)
        coefficients = [lms_coefficient(current, sigmas, i, j) for j in range(current)]
        x = p.x + sum(c * d for c, d in zip(coefficients, reversed(ds), strict=False))
    return x


def dpmpp_2m(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    old: torch.Tensor | None = None
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        if sigma_next == 0:
            x = p.denoised  # (0 / sigma) * x - expm1(-inf) * denoised
        else:
            t, t_next = neg_log(sigma), neg_log(sigma_next)
            h = t_next - t
            mixed = p.denoised
            if old is not None:
                r = (t - neg_log(sigmas[i - 1])) / h
                mixed = (1 + 1 / (2 * r)) * p.denoised - (1 / (2 * r)) * old
            x = (sigma_next / sigma) * p.x - math.expm1(-h) * mixed
        old = p.denoised
    return x


def _ipndm_weights(order: int) -> tuple[float, ...]:
    # Adams-Bashforth on the derivative, newest first (iPNDM's fixed-step coefficients).
    return {
        1: (1.0,),
        2: (3 / 2, -1 / 2),
        3: (23 / 12, -16 / 12, 5 / 12),
        4: (55 / 24, -59 / 24, 37 / 24, -9 / 24),
    }[order]


def ipndm(walk: Walk, x: torch.Tensor, sigmas: list[float], max_order: int = 4) -> Run:
    history: list[torch.Tensor] = []
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        d = p.derivative
        if sigma_next == 0:
            x = p.denoised
        else:
            weights = _ipndm_weights(min(max_order, i + 1))
            terms = [d, *reversed(history)]
            slope = sum(w * term for w, term in zip(weights, terms, strict=False))
            x = p.x + (sigma_next - sigma) * slope
        history = [*history, d][-(max_order - 1) :]
    return x


def gradient_estimation(
    walk: Walk, x: torch.Tensor, sigmas: list[float], ge_gamma: float = 2.0
) -> Run:
    """Gradient estimation (Permenter & Yuan, openreview o2ND9v0CeK; ComfyUI's, gamma 2): Euler
    first, then each step along `gamma * d + (1 - gamma) * d_previous`, down to the last."""
    old: torch.Tensor | None = None
    for sigma, sigma_next in zip(sigmas, sigmas[1:], strict=False):
        p = yield x, sigma
        d = p.derivative
        slope = d if old is None else ge_gamma * d + (1 - ge_gamma) * old
        x = p.x + slope * (sigma_next - sigma)
        old = d
    return x


def _phi1(t: float) -> float:
    return math.expm1(t) / t


def _phi2(t: float) -> float:
    return (_phi1(t) - 1.0) / t


def _res_multistep(
    walk: Walk, x: torch.Tensor, sigmas: list[float], eta: float, cfg_pp: bool = False
) -> Run:
    """The second-order multistep exponential integrator of arXiv 2308.02157; with `eta`, each
    step lands at its ancestral sigma_down and noise takes it to the next level. `cfg_pp`:
    ComfyUI's CFG++ form, stepping along the unconditional estimate (its history too)."""
    old: torch.Tensor | None = None
    old_down = sigmas[0]
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        down, up = ancestral_step(sigma, sigma_next, eta)
        if down == 0 or old is None:
            if cfg_pp:
                x = p.denoised + (p.x - p.uncond_denoised) / sigma * down
            else:
                x = p.x + p.derivative * (down - sigma)
        else:
            t, t_next = neg_log(sigma), neg_log(down)
            h = t_next - t
            c2 = (neg_log(sigmas[i - 1]) - neg_log(old_down)) / h
            b2 = _phi2(-h) / c2
            b1 = _phi1(-h) - b2
            if cfg_pp:
                x = p.x + (p.denoised - p.uncond_denoised)
                x = math.exp(-h) * x + h * (b1 * p.uncond_denoised + b2 * old)
            else:
                x = math.exp(-h) * p.x + h * (b1 * p.denoised + b2 * old)
        if sigma_next > 0 and up > 0:
            x = x + walk.noise(x) * up
        old, old_down = (p.uncond_denoised if cfg_pp else p.denoised), down
    return x


def res_multistep(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _res_multistep(walk, x, sigmas, 0.0))


def res_multistep_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _res_multistep(walk, x, sigmas, 0.0, cfg_pp=True))


def res_multistep_ancestral(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _res_multistep(walk, x, sigmas, 1.0))


def res_multistep_ancestral_cfg_pp(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    return (yield from _res_multistep(walk, x, sigmas, 1.0, cfg_pp=True))


def ipndm_v(walk: Walk, x: torch.Tensor, sigmas: list[float], max_order: int = 4) -> Run:
    """iPNDM with variable step sizes: Adams-Bashforth weights for the schedule's own spacing
    (zju-pi's diff-solvers, as ComfyUI runs it)."""
    history: list[torch.Tensor] = []
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        d = p.derivative
        order = min(max_order, i + 1)
        if sigma_next == 0:
            x = p.denoised
        else:
            weights = _variable_weights(order, sigmas, i)
            terms = [d, *reversed(history)]
            slope = sum(w * term for w, term in zip(weights, terms, strict=False))
            x = p.x + (sigma_next - sigma) * slope
        history = [*history, d][-(max_order - 1) :]
    return x


def _variable_weights(order: int, t: list[float], i: int) -> tuple[float, ...]:
    if order == 1:
        return (1.0,)
    h0, h1 = t[i + 1] - t[i], t[i] - t[i - 1]
    if order == 2:
        return ((2 + h0 / h1) / 2, -(h0 / h1) / 2)
    h2 = t[i - 1] - t[i - 2]
    t1 = (1 - h0 / (3 * (h0 + h1)) * (h0 * (h0 + h1)) / (h1 * (h1 + h2))) / 2
    if order == 3:
        return (
            (2 + h0 / h1) / 2 + t1,
            -(h0 / h1) / 2 - (1 + h1 / h2) * t1,
            t1 * h1 / h2,
        )
    h3 = t[i - 2] - t[i - 3]
    t2 = (
        ((1 - h0 / (3 * (h0 + h1))) / 2 + (1 - h0 / (2 * (h0 + h1))) * h0 / (6 * (h0 + h1 + h2)))
        * (h0 * (h0 + h1) * (h0 + h1 + h2))
        / (h1 * (h1 + h2) * (h1 + h2 + h3))
    )
    k = h1 * (h1 + h2) / (h2 * (h2 + h3))
    return (
        (2 + h0 / h1) / 2 + t1 + t2,
        -(h0 / h1) / 2 - (1 + h1 / h2) * t1 - (1 + h1 / h2 + k) * t2,
        t1 * h1 / h2 + (h1 / h2 + k * (1 + h2 / h3)) * t2,
        -t2 * k * h1 / h2,
    )
