"""Inpaint parity: an image and a mask wired into `stability/sdxl` render what diffusers'
`StableDiffusionXLInpaintPipeline` renders with the same (4-channel) UNet, image, mask, seed and
strength: the mask's white part repainted, the rest put back after each step (or, with a
9-channel inpaint checkpoint, the mask and the masked image's latents fed to each call). A mask
without its image, a mask of another size, and a sampler that calls the model twice a step are
refused naming why."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from sdxl_harness import max_diff, node_params, sdxl_rig, take_pixels
from test_sdxl_img2img import TOLERANCE, reference_pixels, render_img2img, source_image

from inline_core.contract.submit import Submit
from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl import SDXLFamily
from inline_core.families.sdxl.descriptor import NODE_TYPE
from inline_core.families.sdxl.kit import SDXLKit, write_inpaint_checkpoint
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler


def repaint_mask(width: int, height: int) -> Image.Image:
    """White (repaint) off the 8-pixel grid, so its reading at latent size shows."""
    mask = np.zeros((height, width), dtype=np.uint8)
    mask[13 : height - 10, 21 : width // 2 + 5] = 255
    mask[2:6, :] = 140  # a soft band: binarised at one half, as diffusers reads it
    return Image.fromarray(mask, "L")


@pytest.mark.parametrize(
    ("width", "height", "strength", "sampler", "schedule"),
    [
        (64, 64, 0.8, "euler", "ddim_uniform"),
        (96, 64, 0.6, "dpmpp_2m", "karras"),
        # Full strength (a ComfyUI inpaint at denoise 1): diffusers starts from noise alone.
        (64, 64, 1.0, "euler", "ddim_uniform"),
        (96, 64, 1.0, "dpmpp_2m", "karras"),
    ],
    ids=["euler", "dpmpp-2m-karras", "euler-full-strength", "dpmpp-2m-karras-full-strength"],
)
def test_inpaint_matches_diffusers(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    width: int,
    height: int,
    strength: float,
    sampler: str,
    schedule: str,
) -> None:
    d = diffusers()
    params: dict[str, Any] = {"width": width, "height": height, "steps": 5, "strength": strength}
    params |= {"sampler": sampler, "schedule": schedule}
    image, mask = source_image(width, height), repaint_mask(width, height)
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    result = render_img2img(
        rig, tmp_path, image, mask=mask, model=sdxl_kit.checkpoint_name, **params
    )
    ours = take_pixels(result)
    pipe: Any = d.StableDiffusionXLInpaintPipeline.from_pipe(sdxl_reference)
    config = sdxl_reference.scheduler.config
    if sampler == "euler":
        pipe.scheduler = d.EulerDiscreteScheduler.from_config(config)
    else:
        pipe.scheduler = d.DPMSolverMultistepScheduler.from_config(config, use_karras_sigmas=True)
    assert max_diff(ours, reference_pixels(pipe, image, params, mask_image=mask)) <= TOLERANCE
    (take,) = result.takes
    assert take.params["inpaint"] is True
    # The mask matters: the same render without it is another picture.
    plain = take_pixels(
        render_img2img(rig, tmp_path, image, model=sdxl_kit.checkpoint_name, **params)
    )
    assert max_diff(plain, ours) > 10 * TOLERANCE


def test_a_sampler_with_two_calls_a_step_is_refused_naming_it(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    with pytest.raises(InvalidRequest, match="sampler 'heun' calls the model more than once"):
        render_img2img(
            rig,
            tmp_path,
            source_image(64, 64),
            mask=repaint_mask(64, 64),
            model=sdxl_kit.checkpoint_name,
            width=64,
            height=64,
            steps=4,
            strength=0.8,
            sampler="heun",
        )


def test_a_mask_without_its_image_or_of_another_size_is_refused_at_submit(
    sdxl_kit: SDXLKit,
) -> None:
    family = SDXLFamily(Catalog(sdxl_kit.root, ttl_s=0.0), {})
    params = node_params(steps=4, strength=0.8)
    resolution = family.resolve(NODE_TYPE, params)
    alone = Submit(NODE_TYPE, params, "x", resolution, frozenset({"mask"}), {}, {})
    with pytest.raises(InvalidRequest, match="a mask needs the image it masks"):
        family.check(alone)
    wired = frozenset({"mask", "image"})
    sizes = {"mask": (64, 48), "image": (64, 64)}
    with pytest.raises(InvalidRequest, match="the mask is 64x48 and the image 64x64"):
        family.check(Submit(NODE_TYPE, params, "x", resolution, wired, sizes, {}))
    same = {"mask": (64, 64), "image": (64, 64)}
    family.check(Submit(NODE_TYPE, params, "x", resolution, wired, same, {}))


@pytest.mark.parametrize("strength", [0.8, 1.0], ids=["partial", "full-strength"])
def test_an_inpaint_unet_matches_diffusers(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    strength: float,
) -> None:
    """A 9-channel inpaint checkpoint: each call sees the latents, the mask and the masked
    image's latents, nothing blended, as StableDiffusionXLInpaintPipeline feeds it (at full
    strength from noise alone, the image never encoded, only its masked copy)."""
    d = diffusers()
    models = tmp_path / "models"
    shutil.copytree(sdxl_kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    checkpoint, inpaint_unet = write_inpaint_checkpoint(models)
    params: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "strength": strength}
    params |= {"sampler": "euler", "schedule": "ddim_uniform"}
    image, mask = source_image(64, 64), repaint_mask(64, 64)
    rig = sdxl_rig(models, sdxl_sampler)
    result = render_img2img(rig, tmp_path, image, mask=mask, model=checkpoint.name, **params)
    pipe: Any = d.StableDiffusionXLInpaintPipeline.from_pipe(sdxl_reference, unet=inpaint_unet)
    pipe.scheduler = d.EulerDiscreteScheduler.from_config(sdxl_reference.scheduler.config)
    ours = take_pixels(result)
    assert max_diff(ours, reference_pixels(pipe, image, params, mask_image=mask)) <= TOLERANCE
    with pytest.raises(InvalidRequest, match="an inpaint model"):  # it needs both inputs
        render_img2img(rig, tmp_path, image, model=checkpoint.name, **params)
