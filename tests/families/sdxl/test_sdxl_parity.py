"""Pixel parity (epsilon, and v-prediction for a checkpoint marked `v_pred`): an SDXL take
rendered through the node runner and the step loop equals what
diffusers' `StableDiffusionXLPipeline` renders from the same all-in-one checkpoint
(`from_single_file`), seed and params.

The samplers are the sigma library's under ComfyUI's names; each case pairs one with the
diffusers scheduler that walks the same sigmas: `euler` on `ddim_uniform` is
`EulerDiscreteScheduler` with SDXL's "leading" spacing (timesteps 1 + k * 1000 // steps), as
`heun`, `lms` and `dpm_2` on it are `HeunDiscreteScheduler`, `LMSDiscreteScheduler` and
`KDPM2DiscreteScheduler`; `dpmpp_2m` and `uni_pc_bh2` on `karras` are
`DPMSolverMultistepScheduler` and `UniPCMultistepScheduler` (bh2) with Karras sigmas. The first
point is handed to diffusers (see `_latents_scale`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from sdxl_harness import max_diff, reference_pixels, render, sdxl_rig, take_pixels

from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255: the CFG rows batched as two where diffusers runs one batch


def _scheduler(pipe: Any, kind: str, prediction: str = "epsilon") -> Any:
    import diffusers
    from diffusers import (
        DPMSolverMultistepScheduler,  # pyright: ignore[reportPrivateImportUsage]
        EulerDiscreteScheduler,  # pyright: ignore[reportPrivateImportUsage]
    )

    config = {**pipe.scheduler.config, "prediction_type": prediction}
    if kind == "euler":
        return EulerDiscreteScheduler.from_config(config)  # pyright: ignore
    if kind in VE_SCHEDULERS:
        return getattr(diffusers, VE_SCHEDULERS[kind]).from_config(config)  # pyright: ignore
    if kind == "bh2":  # UniPC at ComfyUI's order 3 on Karras sigmas, from the largest (its
        # last step ends at sigma 0.001, diffusers' at 0: well under a level); diffusers' bh1
        # steps to a zero final sigma as NaN, so `uni_pc` (bh1) is checked on the toy model only
        # (`tests/diffusion/test_sigma_unipc_comfy.py`)
        return diffusers.UniPCMultistepScheduler.from_config(  # pyright: ignore
            config,
            solver_type=kind,
            solver_order=3,
            use_karras_sigmas=True,
            final_sigmas_type="zero",
        )
    return DPMSolverMultistepScheduler.from_config(config, use_karras_sigmas=True)  # pyright: ignore


# diffusers' variance-exploding schedulers besides Euler, by case kind: they start from the
# latents times sqrt(1 + sigma^2), as Euler does (`_latents_scale`).
VE_SCHEDULERS = {
    "heun": "HeunDiscreteScheduler",
    "lms": "LMSDiscreteScheduler",
    "dpm_2": "KDPM2DiscreteScheduler",
}


def _latents_scale(scheduler: Any, params: dict[str, Any]) -> float:
    """The latents that make diffusers start where KSampler starts. Euler's "leading" spacing
    never begins at the model's largest sigma, so KSampler's first point is `noise * sigma`,
    where diffusers' is `latents * sqrt(1 + sigma^2)`. DPM-Solver walks the variance-preserving
    `x / sqrt(1 + sigma^2)` from `latents` themselves: KSampler's `noise * sqrt(1 + sigma^2)` at
    the largest sigma is its plain noise."""
    if (
        not isinstance(scheduler, _euler())
        and type(scheduler).__name__ not in VE_SCHEDULERS.values()
    ):
        return 1.0
    scheduler.set_timesteps(params.get("steps", 4))
    first = float(scheduler.sigmas[0])
    return first / math.sqrt(1 + first * first)


def _euler() -> type:
    from diffusers import EulerDiscreteScheduler  # pyright: ignore[reportPrivateImportUsage]

    return EulerDiscreteScheduler


CASES = [
    pytest.param("euler", {"sampler": "euler", "schedule": "ddim_uniform"}, id="euler-square"),
    pytest.param(
        "euler",
        {"sampler": "euler", "schedule": "ddim_uniform", "width": 96, "height": 64},
        id="euler-wide",
    ),
    pytest.param("dpm", {"sampler": "dpmpp_2m", "schedule": "karras"}, id="dpmpp2m-karras"),
    pytest.param("heun", {"sampler": "heun", "schedule": "ddim_uniform"}, id="heun"),
    pytest.param("lms", {"sampler": "lms", "schedule": "ddim_uniform"}, id="lms"),
    pytest.param("dpm_2", {"sampler": "dpm_2", "schedule": "ddim_uniform"}, id="dpm-2"),
    pytest.param("bh2", {"sampler": "uni_pc_bh2", "schedule": "karras"}, id="unipc-bh2-karras"),
    pytest.param(
        "euler",
        {"sampler": "euler", "schedule": "ddim_uniform", "clip_skip": -3},
        id="euler-clip-skip",
    ),
    pytest.param(
        "euler",
        {"sampler": "euler", "schedule": "ddim_uniform", "model": "sdxl_tiny_vpred.safetensors"},
        id="euler-v-prediction",
    ),
    pytest.param(
        "dpm",
        {"sampler": "dpmpp_2m", "schedule": "karras", "width": 64, "height": 112, "steps": 5},
        id="dpmpp2m-karras-tall",
    ),
]


@pytest.mark.parametrize(("kind", "params"), CASES)
def test_checkpoint_matches_diffusers(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    kind: str,
    params: dict[str, Any],
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    params = dict(params)  # the case's own dict stays as parametrized
    model = params.pop("model", sdxl_kit.checkpoint_name)
    ours = take_pixels(render(rig, tmp_path, model=model, **params))
    # The v-prediction checkpoint holds the same weights; only its marker differs.
    prediction = "v_prediction" if model.endswith("_vpred.safetensors") else "epsilon"
    scheduler = _scheduler(sdxl_reference, kind, prediction)
    ref = reference_pixels(
        sdxl_reference, scheduler, latents_scale=_latents_scale(scheduler, params), **params
    )
    assert ours.shape == (params.get("height", 64), params.get("width", 64), 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert ours.std() > 1.0  # a picture of noise, not a flat fill
