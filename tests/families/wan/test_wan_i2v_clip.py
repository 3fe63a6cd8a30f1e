"""Wan 2.1 image-to-video on the kit's tiny stack (36 channels in, an image embedder fed by a
tiny CLIP vision encoder the kit builds): a render equals diffusers' `WanImageToVideoPipeline`
with its `image_encoder` and `image_processor`, within the levels `test_wan_parity.py` explains,
on both layouts (ComfyUI's `clip_vision/` file, or the folder's own encoder); the image reaches
the video through both paths; a missing CLIP vision file is a `model_missing` naming where it
goes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from wan_harness import (
    first_frame_image,
    max_diff,
    reference_i2v_frames,
    reference_pipe,
    render,
    take_frames,
    wan_rig,
)

from inline_core.errors import ModelMissing
from inline_core.families.wan.descriptor import NODE_TYPE
from inline_core.families.wan.kit import WanKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
FILE, FOLDER = "wan2.1_i2v_tiny_fp32.safetensors", "wan2.1_i2v_tiny_diffusers"
CASES = [
    pytest.param({"guidance": 1.0}, id="nocfg"),
    pytest.param(
        {"guidance": 4.0, "negative_prompt": "blurry", "width": 32, "height": 48}, id="cfg"
    ),
]


@pytest.fixture(scope="module")
def clip_i2v_reference(wan_kit: WanKit) -> Any:
    pipe = reference_pipe("WanImageToVideoPipeline", wan_kit.i2v_diffusers_dir)
    assert pipe.image_encoder is not None and pipe.transformer.config.image_dim is not None
    return pipe


@pytest.mark.parametrize("model", [FILE, FOLDER], ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", CASES)
def test_wan21_i2v_matches_image_to_video_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    wan_reference: Any,
    clip_i2v_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    image = first_frame_image(50, 40)
    rig = wan_rig(wan_kit.root, wan_sampler)
    result = render(rig, tmp_path, image=image, model=model, **params)
    ours = take_frames(result)
    ref = reference_i2v_frames(clip_i2v_reference, wan_reference, image, **params)
    assert ours.shape == (9, params.get("height", 32), params.get("width", 48), 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    assert ours.std() > 1.0
    (take,) = result.takes
    assert take.params["image_to_video"] is True


def test_the_clip_view_conditions_the_video(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """The image embedder's input matters: the same frame with another CLIP view (another
    image's embeds put in its place) renders otherwise."""
    rig = wan_rig(wan_kit.root, wan_sampler)
    pipeline = rig.pipeline(FILE)
    image, other = first_frame_image(48, 32), first_frame_image(48, 32, seed=5)
    request: dict[str, Any] = {"prompt": "a fox", "width": 48, "height": 32, "frames": 5}
    request.update(steps=2, guidance=1.0, seed=3, format="png")
    plain = pipeline.prepare_encode(pipeline.request(**request, image=image))
    swapped = pipeline.prepare_encode(pipeline.request(**request, image=image))
    swapped.image_embeds = pipeline.prepare_encode(
        pipeline.request(**request, image=other)
    ).image_embeds
    first, second = pipeline.denoise_step([plain]), pipeline.denoise_step([swapped])
    assert float((first[0] - second[0]).abs().max()) > 0


def test_a_missing_clip_vision_is_model_missing_naming_where_it_goes(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    shutil.copytree(wan_kit.root, models)
    shutil.rmtree(models / "clip_vision")
    family = wan_rig(models, wan_sampler).family
    with pytest.raises(ModelMissing) as raised:
        family.resolve(NODE_TYPE, {"model": FILE}).require("w")
    message = raised.value.message
    assert "image encoder" in message and "clip_vision_h.safetensors" in message
    assert str(models / "clip_vision") in message
    folder = family.resolve(NODE_TYPE, {"model": FOLDER}).require("w")  # brings its own
    assert folder.require("image_encoder").subfolder == "image_encoder"
