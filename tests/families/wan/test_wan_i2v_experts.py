"""Wan 2.2 A14B image-to-video on the kit's tiny i2v pair (36 channels in: the image's latents
and a first-frame mask beside the noise, no image embedder): a render equals diffusers'
`WanImageToVideoPipeline(transformer, transformer_2, boundary_ratio=0.9)` within the levels
`test_wan_parity.py` explains, with and without guidance, on both layouts; a render without an
image is refused, naming the input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wan_harness import (
    first_frame_image,
    max_diff,
    node_params,
    reference_i2v_frames,
    reference_pipe,
    render,
    submit_check,
    take_frames,
    wan_rig,
)

from inline_core.errors import InvalidRequest
from inline_core.families.wan.kit import WanKit
from inline_core.families.wan.variants import A14B_I2V
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
HIGH = "wan2.2_i2v_high_noise_tiny_fp32.safetensors"
FOLDER = "wan2.2_i2v_a14b_tiny_diffusers"
# 4 steps at shift 5: timesteps 1000, 937, 833, 625; two on each expert (the boundary is 900).
STEPS = 4
CASES = [
    pytest.param({"guidance": 1.0}, id="nocfg"),
    pytest.param({"guidance": 3.5, "negative_prompt": "blurry"}, id="cfg"),
    pytest.param({"guidance": 3.5, "guidance_2": 2.0, "width": 32, "height": 48}, id="cfg2-tall"),
]


@pytest.fixture(scope="module")
def i2v_pair_reference(wan_kit: WanKit) -> Any:
    pipe = reference_pipe("WanImageToVideoPipeline", wan_kit.a14b_i2v_diffusers_dir)
    assert pipe.transformer_2 is not None and pipe.image_encoder is None
    return pipe


@pytest.mark.parametrize("model", [HIGH, FOLDER], ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", CASES)
def test_the_i2v_pair_matches_image_to_video_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    wan_reference: Any,
    i2v_pair_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    image = first_frame_image(50, 40)  # another size and aspect: resized as diffusers does
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, image=image, model=model, steps=STEPS, **params)
    ours = take_frames(result)
    ref = reference_i2v_frames(i2v_pair_reference, wan_reference, image, steps=STEPS, **params)
    assert ours.shape == (9, params.get("height", 32), params.get("width", 48), 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    assert ours.std() > 1.0
    (take,) = result.takes
    assert take.params["image_to_video"] is True
    assert take.params["boundary_ratio"] == A14B_I2V.boundary
    if model == HIGH and params["guidance"] == 1.0:  # once: the image conditions the video
        other_image = first_frame_image(50, 40, seed=1)
        other = take_frames(
            render(rig, tmp_path, image=other_image, model=model, steps=STEPS, **params)
        )
        assert max_diff(ours, other) > 8


def test_the_i2v_pair_without_an_image_is_refused_naming_the_input(
    wan_kit: WanKit, wan_sampler: StepLoopSampler
) -> None:
    family = wan_rig(wan_kit.root, wan_sampler).family
    params = node_params(model=HIGH)
    with pytest.raises(InvalidRequest, match="'image'"):
        submit_check(family, params, {"prompt"})
    submit_check(family, params, {"prompt", "image"})
