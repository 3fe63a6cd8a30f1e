"""img2img parity: an image wired into `stability/sdxl` renders what diffusers'
`StableDiffusionXLImg2ImgPipeline` renders over the same checkpoint, image, seed and strength
(Euler on SDXL's "leading" timesteps: `euler` on `ddim_uniform`), and a strength that leaves no
step is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from sdxl_harness import PROMPT, max_diff, node_params, sdxl_rig, take_pixels

from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.graph.runner import NodeCall
from inline_core.sampling.loop import StepLoopSampler
from tests.families.node_context import node_context

TOLERANCE = 2  # levels of 255: the CFG rows batched as two where diffusers runs one batch


def source_image(width: int, height: int) -> Image.Image:
    rng = np.random.default_rng(4)
    smooth = rng.integers(0, 256, (height // 8, width // 8, 3), dtype=np.uint8)
    return Image.fromarray(smooth).resize((width, height), Image.Resampling.BILINEAR)


def render_img2img(
    rig: Any, tmp_path: Path, image: Image.Image, mask: Image.Image | None = None, **params: Any
) -> Any:
    ctx = node_context(tmp_path)
    inputs: dict[str, Any] = {"prompt": PROMPT, "image": image}
    if mask is not None:
        inputs["mask"] = mask
    return rig.run(NodeCall(ctx=ctx, node_id="x", params=node_params(**params), inputs=inputs))


def reference_pixels(pipe: Any, image: Image.Image, params: dict[str, Any], **extra: Any) -> Any:
    """diffusers' image-to-image pipeline `pipe` over the node's params (its defaults filled)."""
    p = node_params(**params)
    ref_image = pipe(
        prompt=PROMPT,
        negative_prompt=p["negative_prompt"],
        image=image,
        strength=p["strength"],
        width=p["width"],
        height=p["height"],
        num_inference_steps=p["steps"],
        guidance_scale=p["guidance"],
        generator=torch.Generator("cpu").manual_seed(p["seed"]),
        output_type="np",
        **extra,
    ).images[0]
    return (np.asarray(ref_image) * 255).round().astype(np.uint8).astype(np.int16)


@pytest.mark.parametrize(("width", "height", "strength"), [(64, 64, 0.6), (96, 64, 0.8)])
def test_img2img_matches_diffusers(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    width: int,
    height: int,
    strength: float,
) -> None:
    from diffusers import (
        EulerDiscreteScheduler,  # pyright: ignore
        StableDiffusionXLImg2ImgPipeline,  # pyright: ignore
    )

    params: dict[str, Any] = {"width": width, "height": height, "steps": 5, "strength": strength}
    params |= {"sampler": "euler", "schedule": "ddim_uniform"}
    image = source_image(width, height)
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    result = render_img2img(rig, tmp_path, image, model=sdxl_kit.checkpoint_name, **params)
    ours = take_pixels(result)
    pipe: Any = StableDiffusionXLImg2ImgPipeline.from_pipe(sdxl_reference)  # pyright: ignore
    pipe.scheduler = EulerDiscreteScheduler.from_config(sdxl_reference.scheduler.config)  # pyright: ignore
    assert max_diff(ours, reference_pixels(pipe, image, params)) <= TOLERANCE
    (take,) = result.takes
    assert take.params["img2img"] is True and take.params["strength"] == strength


def test_a_strength_that_leaves_no_step_is_refused(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler
) -> None:
    pipeline = sdxl_rig(sdxl_kit.root, sdxl_sampler).pipeline(sdxl_kit.checkpoint_name)
    base = {"prompt": "x", "width": 64, "height": 64, "guidance": 1.0, "seed": 1}
    with pytest.raises(InvalidRequest, match="leaves no step"):
        pipeline.request(**base, steps=4, image=source_image(64, 64), strength=0.2)
    assert (
        pipeline.request(**base, steps=4, image=source_image(64, 64), strength=0.25).step_count == 1
    )


def test_the_node_refuses_such_a_strength_at_submit(sdxl_kit: SDXLKit) -> None:
    from inline_core.contract.submit import Submit
    from inline_core.families.sdxl import SDXLFamily
    from inline_core.families.sdxl.descriptor import NODE_TYPE
    from inline_core.models.catalog import Catalog

    family = SDXLFamily(Catalog(sdxl_kit.root, ttl_s=0.0), {})
    params = node_params(steps=4, strength=0.2)
    resolution = family.resolve(NODE_TYPE, params)
    submit = Submit(NODE_TYPE, params, "x", resolution, frozenset({"image"}), {}, {})
    with pytest.raises(InvalidRequest, match="strength 0.2 with an image wired leaves no step"):
        family.check(submit)
    family.check(Submit(NODE_TYPE, params, "x", resolution, frozenset(), {}, {}))  # no image
