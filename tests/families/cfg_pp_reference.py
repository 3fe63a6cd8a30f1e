"""An independent reference for the CFG++ samplers (ComfyUI's `sample_euler_cfg_pp` and
`sample_dpmpp_2m_cfg_pp`), written out here rather than taken from the sigma library: the step
on an epsilon or flow model's guided and unconditional clean estimates, and a diffusers flow
pipeline run with that step in place of its scheduler's (its transformer's unconditional output
read as it is computed)."""

from __future__ import annotations

import math
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any


def cfg_pp_step(
    sampler: str,
    x: Any,
    sigmas: list[float],
    i: int,
    denoised: Any,
    uncond: Any,
    old_uncond: Any,
    *,
    flow: bool,
) -> Any:
    """Step `i` of ComfyUI's `sampler` from `x` at `sigmas[i]`: `denoised` the guided clean
    estimate, `uncond` the unconditional one (`old_uncond`: the previous step's). A flow model's
    signal scale is `1 - sigma`, an epsilon model's 1."""
    sigma, sigma_next = sigmas[i], sigmas[i + 1]
    if sigma_next == 0:
        return denoised
    if sampler == "euler_cfg_pp":
        alpha, alpha_next = (1 - sigma, 1 - sigma_next) if flow else (1.0, 1.0)
        to_noise = (x - alpha * uncond) / sigma  # the noise the unconditional estimate leaves
        return alpha_next * denoised + sigma_next * to_noise
    if sampler != "dpmpp_2m_cfg_pp":
        raise ValueError(f"no reference for {sampler!r}")
    t, t_next = -math.log(sigma), -math.log(sigma_next)
    h = t_next - t
    mix = -math.exp(-h) * uncond
    if old_uncond is not None:
        r = (t + math.log(sigmas[i - 1])) / h
        mix = mix - math.expm1(-h) * (1 / (2 * r)) * (denoised - old_uncond)
    return denoised + mix + math.exp(-h) * x


@contextmanager
def cfg_pp_scheduler(pipe: Any, sampler: str) -> Generator[None]:
    """`pipe` (a diffusers flow pipeline that calls its transformer on the prompt, then on the
    negative, and steps its scheduler with the guided velocity) steps with `cfg_pp_step` over
    its scheduler's own sigmas instead."""
    outputs: list[Any] = []

    def record(_module: Any, _args: Any, out: Any) -> None:
        outputs.append(out[0])

    hook = pipe.transformer.register_forward_hook(record)
    scheduler = pipe.scheduler
    state: dict[str, Any] = {"i": 0, "old": None}

    def step(noise_pred: Any, _t: Any, latents: Any, return_dict: bool = False) -> tuple[Any]:
        i = int(state["i"])
        sigmas: list[float] = scheduler.sigmas.tolist()
        sigma = sigmas[i]
        negative = outputs[-1][:, : latents.size(1)]  # the last call: the negative prompt's
        denoised = latents - sigma * noise_pred
        uncond = latents - sigma * negative
        x = cfg_pp_step(sampler, latents, sigmas, i, denoised, uncond, state["old"], flow=True)
        state.update(i=i + 1, old=uncond)
        return (x.to(latents.dtype),)

    scheduler.step = step
    try:
        yield
    finally:
        hook.remove()
        del scheduler.step  # the class's own again
