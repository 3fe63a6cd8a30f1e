"""UniPC (Zhao et al., arXiv 2302.04867): a multistep predictor, then a corrector that reuses the
model call the predictor's point gets, so it costs one call a step. Written on sigma in the
model's own log-SNR (`ModelSampling.half_log_snr`, with `alpha = sigma * exp(lambda)`: 1 for an
epsilon or v model, `1 - sigma` for a flow model), which is the arithmetic of diffusers'
`UniPCMultistepScheduler` (data prediction, `bh1` or `bh2`, its order rule: warm up from order 1,
lower the order over the last steps), its scalars in float32 as it computes them: a flow model's
render at order 2 is diffusers' bit for bit. The last step to sigma 0 has order 1 and lands on the
model's clean estimate: its residual term is absent, where diffusers multiplies bh1's infinite
B(h) by zero and renders NaN.

ComfyUI's `uni_pc` and `uni_pc_bh2` (`comfy/extra_samplers/uni_pc.py`, `sample_unipc`) are the
same updates at order 3 with three differences of its own (`UniPC.comfyui`): it reads every
model's sigma as an epsilon model's (its `SigmaConvert`: log-SNR `-log sigma`, a flow model's too),
a walk to sigma 0 ends at sigma 0.001 instead, and its order is capped at steps - 1, so a one-step
walk calls the model once and only rescales its start."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal, cast

import numpy as np
import torch

from inline_core.diffusion.sigma.algorithms.walk import Algorithm, Run, Walk

Variant = Literal["bh1", "bh2"]
_FLOW_NUDGE = 1e-6
_COMFY_LAST_SIGMA = 0.001  # where ComfyUI's `sample_unipc` ends a walk to sigma 0


@dataclass(frozen=True)
class UniPC:
    variant: Variant = "bh2"
    order: int = 2  # diffusers' `solver_order`
    corrector: bool = True
    # diffusers' diffusion-forcing pipelines (SkyReels-V2) step a view of their latents and write
    # the result into it, so the scheduler's remembered first point becomes the one it predicted:
    # its first correction starts from there. True: that render, as those pipelines make it.
    first_correction_in_place: bool = False
    # ComfyUI's `sample_unipc` (module docstring): its log-SNR, last sigma and order cap.
    comfyui: bool = False

    def __post_init__(self) -> None:
        if self.variant not in ("bh1", "bh2"):
            raise ValueError(f"UniPC's variant is bh1 or bh2, not {self.variant!r}")
        if not 1 <= self.order <= 3:
            raise ValueError(f"UniPC's order is 1, 2 or 3, not {self.order}")

    @property
    def algorithm(self) -> Algorithm:
        return partial(unipc, config=self)


def _f32(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32)


Levels = Literal["flow", "epsilon", "comfyui"]


def _level(levels: Levels, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(alpha in the sampler's x, log-SNR) at `sigma`, in float32 as diffusers computes them, or
    ComfyUI's epsilon log-SNR in its `SigmaConvert`'s order of operations."""
    s = _f32(sigma)
    if levels == "comfyui":
        log_alpha = 0.5 * torch.log(1 / (s * s + 1))
        return _f32(1.0), log_alpha - 0.5 * torch.log(1.0 - torch.exp(2.0 * log_alpha))
    if levels == "flow":
        alpha = 1 - s
        return alpha, torch.log(alpha) - torch.log(s)
    alpha_vp = 1 / ((s**2 + 1) ** 0.5)
    return _f32(1.0), torch.log(alpha_vp) - torch.log(s * alpha_vp)


def _solved(matrix: torch.Tensor, rhs: torch.Tensor) -> list[float]:
    solve = cast(Callable[[torch.Tensor, torch.Tensor], torch.Tensor], torch.linalg.solve)  # pyright: ignore[reportUnknownMemberType]
    return [float(v) for v in solve(matrix, rhs).unbind()]


@dataclass(frozen=True)
class _Coefficients:
    """One UniPC update from `sigma` to `sigma_next` of `order`: float32 scalars computed in
    diffusers' order of operations, so a flow model's steps are its scheduler's bit for bit."""

    ratio: float  # sigma_next / sigma
    alpha_phi: float  # alpha_next * h * phi_1(h)
    alpha_b: float  # alpha_next * B(h); 0 where the step lands on sigma 0 at order 1
    rks: list[float]  # the earlier levels' log-SNR distances, over this step's
    predictor: list[float]  # weights of the earlier differences
    corrector: list[float]  # the same, then the weight of the new one

    @classmethod
    def of(cls, levels: Levels, variant: Variant, order: int, sigmas: list[float]) -> _Coefficients:
        """`sigmas`: the earlier levels, oldest first, then the current one, then the target."""
        sigma, sigma_next = sigmas[-2], sigmas[-1]
        if sigma_next == 0:  # h infinite: the update is the clean estimate
            return cls(0.0, -1.0, 0.0, [], [], [])
        alpha_next, lam_next = _level(levels, sigma_next)
        lam = _level(levels, sigma)[1]
        h = lam_next - lam
        rk_values = [(_level(levels, sigmas[-2 - i])[1] - lam) / h for i in range(1, order)]
        rks = torch.tensor([*rk_values, 1.0])
        hh = -h
        h_phi_1 = torch.expm1(hh)
        h_phi_k = h_phi_1 / hh - 1
        b_h = hh if variant == "bh1" else torch.expm1(hh)
        rows: list[torch.Tensor] = []
        b: list[torch.Tensor] = []
        factorial = 1
        for i in range(1, order + 1):
            rows.append(torch.pow(rks, i - 1))
            b.append(h_phi_k * factorial / b_h)
            factorial *= i + 1
            h_phi_k = h_phi_k / hh - 1 / factorial
        matrix, rhs = torch.stack(rows), torch.tensor(b)
        if order == 1:
            predictor: list[float] = []
        elif order == 2:
            predictor = [0.5]
        else:
            predictor = _solved(matrix[:-1, :-1], rhs[:-1])
        corrector = [0.5] if order == 1 else _solved(matrix, rhs)
        # ComfyUI's ratio of noise levels is its log-SNR's, exp(-h): the same, up to rounding
        ratio = h_phi_1 + 1 if levels == "comfyui" else _f32(sigma_next) / _f32(sigma)
        return cls(
            float(ratio),
            float(alpha_next * h_phi_1),
            float(alpha_next * b_h),
            [float(rk) for rk in rk_values],
            predictor,
            corrector,
        )


def unipc(walk: Walk, x: torch.Tensor, sigmas: list[float], config: UniPC = UniPC()) -> Run:
    levels: Levels = "comfyui" if config.comfyui else "flow" if walk.sampling.flow else "epsilon"
    if levels == "flow" and sigmas and abs(sigmas[0] - 1.0) < _FLOW_NUDGE:
        # Sigma 1 has no finite log-SNR: diffusers starts a hair below it.
        sigmas = [float(np.float32(sigmas[0] - _FLOW_NUDGE)), *sigmas[1:]]
    steps = len(sigmas) - 1
    if steps < 1:
        return x
    targets = sigmas  # the levels the updates step to; the model is called at `sigmas`
    if config.comfyui and sigmas[-1] == 0:
        targets = [*sigmas[:-1], _COMFY_LAST_SIGMA]
    p = yield x, sigmas[0]
    outputs = [p.denoised]  # the model's clean estimates, oldest first
    x = p.x
    if config.comfyui and steps == 1:  # its order min(3, steps - 1) is 0: no update is made
        return x * float(((_f32(targets[1]) ** 2 + 1) / (_f32(targets[0]) ** 2 + 1)) ** 0.5)
    for i in range(steps):
        order = min(config.order, steps - i, i + 1)
        c = _Coefficients.of(levels, config.variant, order, targets[: i + 2][-(order + 1) :])
        m0 = outputs[-1]
        diffs = [(outputs[-1 - k] - m0) / c.rks[k - 1] for k in range(1, order)]
        base = c.ratio * x - c.alpha_phi * m0
        predicted = base
        if c.predictor and c.alpha_b:
            predicted = base - c.alpha_b * _weighted(c.predictor, diffs)
        if i == steps - 1:
            return predicted  # no call at the end: nothing would use it
        p = yield predicted, sigmas[i + 1]
        new = p.denoised
        if config.corrector and c.alpha_b:
            correction = _weighted(c.corrector[:-1], diffs) + c.corrector[-1] * (new - m0)
            if i == 0 and config.first_correction_in_place:
                base = c.ratio * predicted - c.alpha_phi * m0
            x = base - c.alpha_b * correction
        else:
            x = p.x
        outputs = [*outputs, new][-config.order :]
    return x


def _weighted(weights: list[float], terms: list[torch.Tensor]) -> torch.Tensor | float:
    total: torch.Tensor | float = 0.0
    for w, term in zip(weights, terms, strict=True):
        total = total + w * term
    return total
