"""Wan 2.2 TI2V-5B parity on the kit's tiny TI2V stack: text-to-video equals diffusers'
`WanPipeline` (with `expand_timesteps`: per-token timesteps), and image-to-video equals
`WanImageToVideoPipeline`'s TI2V path (the image's latent as the first latent frame, at timestep
0), from the same weights, seed and params, on both layouts.

Compared on the lossless APNG take, as the Wan 2.1 parity test is (`test_wan_parity.py` says why
guidance and the ComfyUI file may move a few values by a level). The first frame is the image
resized to the render's size, as diffusers resizes it: a first frame of another size and aspect
renders what diffusers renders from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from wan_harness import (
    first_frame_image,
    max_diff,
    reference_frames,
    reference_i2v_frames,
    render,
    take_frames,
    wan_rig,
)

from inline_core.families.wan.kit import WanKit
from inline_core.sampling.loop import StepLoopSampler

# The 5B's sizes are multiples of 32 (its VAE is 16x down, then 2x2 patches).
CASES = [
    pytest.param({"guidance": 1.0, "width": 64, "height": 32}, id="nocfg-wide"),
    pytest.param(
        {"guidance": 4.0, "negative_prompt": "blurry", "width": 32, "height": 32}, id="cfg-square"
    ),
    pytest.param(
        {"guidance": 3.0, "width": 32, "height": 64, "frames": 5, "steps": 4}, id="cfg-tall-5f"
    ),
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
MODELS = ["wan2.2_ti2v_tiny_fp32.safetensors", "wan2.2_ti2v_tiny_diffusers"]


def check(ours: np.ndarray[Any, Any], ref: np.ndarray[Any, Any], params: dict[str, Any]) -> None:
    frames = params.get("frames", 9)
    assert ours.shape == (frames, params["height"], params["width"], 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    assert ours.std() > 1.0  # frames of noise, not a flat fill


@pytest.mark.parametrize("model", MODELS, ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", CASES)
def test_ti2v_text_to_video_matches_wan_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    ti2v_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, model=model, **params)
    check(take_frames(result), reference_frames(ti2v_reference, **params), params)
    (take,) = result.takes
    assert take.params["fps"] == 16  # the node's default (the 5B's own 24 when asked)
    assert take.params["image_to_video"] is False


@pytest.mark.parametrize("model", MODELS, ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", CASES)
def test_ti2v_image_to_video_matches_image_to_video_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    ti2v_reference: Any,
    i2v_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    image = first_frame_image(50, 40)  # another size and aspect than any case: resized
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, image=image, model=model, **params)
    ours = take_frames(result)
    ref = reference_i2v_frames(i2v_reference, ti2v_reference, image, **params)
    check(ours, ref, params)
    (take,) = result.takes
    assert take.params["image_to_video"] is True
    # The image conditions the video: another image gives another first frame.
    other_image = first_frame_image(50, 40, seed=1)
    other = take_frames(render(rig, tmp_path, image=other_image, model=model, **params))
    assert max_diff(ours[:1], other[:1]) > 8
