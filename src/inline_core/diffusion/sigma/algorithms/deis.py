"""DEIS (Zhang and Chen, arXiv 2204.13902) as ComfyUI runs it (`deis`, its "tab" mode, order 3):
an Adams-Bashforth step on the sigma derivative whose weights integrate each Lagrange basis
polynomial, in the time of a VP process fitted to EDM's range (sigma 0.002 to 80), against DEIS's
integrand, by ComfyUI's quadrature (10000 points, float32). The first step and the step to sigma
0 are Euler steps. diffusers' `DEISMultistepScheduler` is another discretisation of DEIS (in
log-SNR), so it is not this sampler's reference."""

from __future__ import annotations

import torch

from inline_core.diffusion.sigma.algorithms.walk import Run, Walk

MAX_ORDER = 3
POINTS = 10000
# EDM's range, which ComfyUI fits its VP process to (`edm2t`).
_EPSILON_S, _SIGMA_MIN, _SIGMA_MAX = 1e-3, 0.002, 80.0


def _vp_betas() -> tuple[torch.Tensor, torch.Tensor]:
    """(beta_min, beta_d) of the VP process, in float32 as ComfyUI computes them."""
    low = torch.log(torch.tensor(_SIGMA_MIN) ** 2 + 1)
    high = torch.log(torch.tensor(_SIGMA_MAX) ** 2 + 1)
    beta_d = 2 * (low / _EPSILON_S - high) / (_EPSILON_S - 1)
    return high - 0.5 * beta_d, beta_d


def vp_times(sigmas: list[float]) -> list[float]:
    """Each sigma's time in the fitted VP process."""
    beta_min, beta_d = _vp_betas()
    s = torch.tensor(sigmas, dtype=torch.float32)
    times = ((beta_min**2 + 2 * beta_d * (s**2 + 1).log()).sqrt() - beta_min) / beta_d
    return [float(t) for t in times.unbind()]


def _integrand(taus: torch.Tensor) -> torch.Tensor:
    beta_min, beta_d = _vp_betas()
    beta_0, beta_1 = beta_min, beta_d + beta_min
    alpha = torch.exp(-0.5 * taus**2 * (beta_1 - beta_0) - taus * beta_0)
    d_log_alpha = -taus * (beta_1 - beta_0) - beta_0
    return -0.5 * d_log_alpha / torch.sqrt(alpha * (1 - alpha))


def coefficients(times: list[float], i: int, order: int) -> list[float]:
    """The weights of step `i`'s derivative and its `order - 1` predecessors."""
    t_cur, t_next = times[i], times[i + 1]
    taus = torch.linspace(t_cur, t_next, POINTS)
    dtau = (t_next - t_cur) / POINTS
    prev = [times[i - k] for k in range(order)]
    weighted = _integrand(taus)
    result: list[float] = []
    for j in range(order):
        poly = torch.ones_like(taus)
        for k in range(order):
            if k != j:
                poly = poly * (taus - prev[k]) / (prev[j] - prev[k])
        result.append(float(torch.sum(weighted * poly) * dtau))
    return result


def deis(walk: Walk, x: torch.Tensor, sigmas: list[float]) -> Run:
    times = vp_times(sigmas)
    history: list[torch.Tensor] = []  # earlier derivatives, newest last
    for i, (sigma, sigma_next) in enumerate(zip(sigmas, sigmas[1:], strict=False)):
        p = yield x, sigma
        d = p.derivative
        order = 1 if sigma_next <= 0 else min(MAX_ORDER, i + 1)
        if order == 1:
            x = p.x + (sigma_next - sigma) * d
        else:
            weights = coefficients(times, i, order)
            x = p.x + weights[0] * d
            for w, earlier in zip(weights[1:], reversed(history), strict=False):
                x = x + w * earlier
        history = [*history, d][-(MAX_ORDER - 1) :]
    return x
