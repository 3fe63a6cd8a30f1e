"""The hires fix on `stability/sdxl`: a first pass, its latents scaled up with
`torch.nn.functional.interpolate` (ComfyUI's LatentUpscale), and a second pass at a denoise
below 1 render what diffusers renders by hand: `StableDiffusionXLPipeline(output_type="latent")`,
the same interpolate, then `StableDiffusionXLImg2ImgPipeline` over those latents with
`steps / denoise` steps at strength `denoise` (ComfyUI's denoise: the last steps of the longer
schedule). Passes the node cannot run are refused naming why."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sdxl_harness import PROMPT, max_diff, node_params, render, sdxl_rig, start_noise, take_pixels
from test_sdxl_img2img import source_image

from inline_core.diffusion.flow.steps import denoise_window
from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.families.sdxl.request import SDXLRequest
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255: the CFG rows batched as two where diffusers runs one batch
EULER = {"sampler": "euler", "schedule": "ddim_uniform"}  # diffusers' Euler, "leading" spacing


def _euler(base: Any) -> Any:
    return diffusers().EulerDiscreteScheduler.from_config(base.scheduler.config)


def hires_reference(base: Any, prompt: str = PROMPT, **params: Any) -> Any:
    """diffusers' two passes written by hand over the node's params (its defaults filled)."""
    p = node_params(**params)
    scheduler = _euler(base)
    scheduler.set_timesteps(p["steps"])
    first = float(scheduler.sigmas[0])
    # KSampler's first point below the model's largest sigma is `noise * sigma`, where
    # diffusers' Euler starts at `latents * sqrt(1 + sigma^2)` (test_sdxl_parity.py).
    latents = start_noise(p["seed"], p["width"], p["height"]) * (
        first / math.sqrt(1 + first * first)
    )
    common: dict[str, Any] = {
        "prompt": prompt,
        "negative_prompt": p["negative_prompt"],
        "guidance_scale": p["guidance"],
    }
    own = base.scheduler
    base.scheduler = scheduler
    try:
        latent = base(
            **common,
            num_inference_steps=p["steps"],
            width=p["width"],
            height=p["height"],
            latents=latents,
            output_type="latent",
        ).images
    finally:
        base.scheduler = own
    size = (p["hires_height"] // 8, p["hires_width"] // 8)
    upscaled = torch.nn.functional.interpolate(latent, size=size, mode=p["hires_method"])
    total, skipped = denoise_window(p["hires_steps"], p["hires_denoise"])
    second = diffusers().StableDiffusionXLImg2ImgPipeline.from_pipe(base)
    second.scheduler = _euler(base)
    image = second(
        **common,
        image=upscaled,
        num_inference_steps=total,
        strength=(total - skipped) / total,
        generator=torch.Generator("cpu").manual_seed(p["seed"]),
        output_type="np",
    ).images[0]
    return (np.asarray(image) * 255).round().astype(np.uint8).astype(np.int16)


def _hires(width: int, height: int, steps: int, denoise: float, method: str) -> dict[str, Any]:
    return {"hires_width": width, "hires_height": height, "hires_steps": steps,
            "hires_denoise": denoise, "hires_method": method}  # fmt: skip


CASES = [
    pytest.param(_hires(96, 96, 4, 0.5, "bilinear"), id="square-bilinear"),
    pytest.param(
        {"width": 96, "height": 64, **_hires(144, 96, 3, 0.6, "nearest-exact")},
        id="wide-nearest-exact",
    ),
    pytest.param(_hires(128, 96, 2, 0.5, "bicubic"), id="reshaped-bicubic"),
]


@pytest.mark.parametrize("params", CASES)
def test_the_hires_fix_matches_diffusers_by_hand(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    result = render(rig, tmp_path, model=sdxl_kit.checkpoint_name, **EULER, **params)
    ours = take_pixels(result)
    assert ours.shape == (params["hires_height"], params["hires_width"], 3)
    assert max_diff(ours, hires_reference(sdxl_reference, **EULER, **params)) <= TOLERANCE
    (take,) = result.takes
    assert take.params["hires"]["method"] == params["hires_method"]


def test_the_render_counts_both_passes_and_switches_size_between(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler
) -> None:
    pipeline = sdxl_rig(sdxl_kit.root, sdxl_sampler).pipeline(sdxl_kit.checkpoint_name)
    hires = {"hires_width": 96, "hires_height": 80, "hires_steps": 3, "hires_denoise": 0.5}
    state: SDXLRequest = pipeline.request(
        **_request(steps=4), hires=_pass(**hires, hires_method="area")
    )
    assert state.step_count == 7
    pipeline.prepare_encode(state)
    keys: list[Any] = []
    while not state.done:
        keys.append(state.batch_key)
        (prediction,) = pipeline.denoise_step([state])
        pipeline.step_scheduler(state, prediction)
    assert [k[2:4] for k in keys] == [(64, 64)] * 4 + [(80, 96)] * 3
    assert state.latents is not None and tuple(state.latents.value.shape) == (1, 4, 10, 12)


def _request(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"prompt": PROMPT, "width": 64, "height": 64, "steps": 4}
    return {**spec, "guidance": 5.0, "seed": 3, **overrides}


def _pass(**params: Any) -> Any:
    from inline_core.families.sdxl.hires import hires_pass

    return hires_pass(params)


@pytest.mark.parametrize(
    ("hires", "extra", "said"),
    [
        ({"hires_method": "bislerp"}, {}, "'bislerp' (ComfyUI's own spherical blend"),
        ({"hires_height": 0}, {}, "set both"),
        ({"hires_width": 100}, {}, "multiples of 8"),
        ({}, {"refiner_switch": 0.8}, "with a refiner"),
        ({}, {"mask": "mask"}, "with a mask"),
    ],
    ids=["bislerp", "one-side", "not-multiple", "refiner", "mask"],
)
def test_passes_the_node_cannot_run_are_refused(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    hires: dict[str, Any],
    extra: dict[str, Any],
    said: str,
) -> None:
    pipeline = sdxl_rig(sdxl_kit.root, sdxl_sampler).pipeline(sdxl_kit.checkpoint_name)
    spec: dict[str, Any] = {"hires_width": 96, "hires_height": 96, "hires_steps": 2,
                            "hires_denoise": 0.5, "hires_method": "bilinear", **hires}  # fmt: skip
    if "mask" in extra:
        extra = {"image": source_image(64, 64), "mask": source_image(64, 64).convert("L")}
    with pytest.raises(InvalidRequest, match=said.replace("(", r"\(")):
        pipeline.request(**_request(), hires=_pass(**spec), **extra)


def test_the_node_refuses_such_a_pass_at_submit(sdxl_kit: SDXLKit) -> None:
    from inline_core.contract.submit import Submit
    from inline_core.families.sdxl import SDXLFamily
    from inline_core.families.sdxl.descriptor import NODE_TYPE
    from inline_core.models.catalog import Catalog

    family = SDXLFamily(Catalog(sdxl_kit.root, ttl_s=0.0), {})
    params = node_params(hires_width=96, hires_height=96)
    resolution = family.resolve(NODE_TYPE, params)
    family.check(Submit(NODE_TYPE, params, "x", resolution, frozenset(), {}, {}))
    wired = frozenset({"image", "mask"})
    with pytest.raises(InvalidRequest, match="a hires pass with a mask wired"):
        family.check(Submit(NODE_TYPE, params, "x", resolution, wired, {}, {}))
    params["hires_method"] = "bislerp"
    with pytest.raises(InvalidRequest, match="'bislerp'"):
        family.check(Submit(NODE_TYPE, params, "x", resolution, frozenset(), {}, {}))
