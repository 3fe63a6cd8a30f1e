"""Frame parity: a SkyReels-V2 take rendered through the node runner and the step loop equals what
diffusers' own `SkyReelsV2DiffusionForcingPipeline` renders from the same tiny weights, seed and
params: one chunk and several, synchronous and asynchronous (`ar_step`), on the lossless APNG.
Image to video equals `SkyReelsV2DiffusionForcingImageToVideoPipeline` the same way: the image's
latent frame is the first chunk's clean prefix, and another image gives another video. Extending
a video equals `SkyReelsV2DiffusionForcingVideoToVideoPipeline`: the given frames, then the new
ones continuing from its last `overlap`.

Within a level, on a handful of pixels: the same float32 ops in the same order, but the step
loop's thread computes with another intra-op thread count than the test's (CPU kernels block
their reductions by it: diffusers' own pipeline run at 1 and 2 threads differs by a level on
these sizes), and with guidance our forward runs the positive and negative prompts as one batch
of two where diffusers runs two batches of one (a few ulps again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from skyreels_harness import (
    LONG,
    Pixels,
    first_frame_image,
    max_diff,
    reference_frames,
    render,
    skyreels_rig,
    source_video,
    take_frames,
)

from inline_core.families.skyreels.kit import SkyReelsKit
from inline_core.sampling.loop import StepLoopSampler

CASES = [
    pytest.param({"guidance": 1.0}, id="short"),
    pytest.param({"guidance": 4.0, "negative_prompt": "blurry"}, id="short-cfg"),
    pytest.param({"guidance": 1.0, "fps": 16, **LONG}, id="long"),
    pytest.param(
        {"guidance": 1.0, "frames": 17, "ar_step": 1, "causal_block_size": 1}, id="short-async"
    ),
    pytest.param(
        {"guidance": 3.0, "ar_step": 2, "causal_block_size": 1, **LONG}, id="long-async-cfg"
    ),
    pytest.param(
        {
            "guidance": 1.0,
            "frames": 29,
            "base_frames": 13,
            "overlap": 5,
            "ar_step": 1,
            "causal_block_size": 2,
        },
        id="long-async-blocks",
    ),
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01


def assert_parity(ours: Pixels, ref: Pixels, frames: int) -> None:
    """`frames` frames at the render's size, equal to the reference's within the tolerance."""
    assert ours.shape == (frames, 32, 48, 3)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING


@pytest.mark.parametrize("params", CASES)
def test_video_matches_diffusion_forcing_pipeline(
    skyreels_kit: SkyReelsKit,
    skyreels_sampler: StepLoopSampler,
    skyreels_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    rig = skyreels_rig(skyreels_kit.root, skyreels_sampler)
    ours = take_frames(render(rig, tmp_path, **params))
    ref = reference_frames(skyreels_reference, **params)
    assert_parity(ours, ref, params.get("frames", 9))
    assert ours.std() > 1.0  # frames of noise, not a flat fill
    assert int(abs(ours[0] - ours[-1]).max()) > 0


I2V_CASES = [
    pytest.param({"guidance": 1.0}, id="short"),
    pytest.param({"guidance": 3.0, "negative_prompt": "blurry", **LONG}, id="long-cfg"),
    pytest.param(
        {"guidance": 1.0, "frames": 17, "ar_step": 1, "causal_block_size": 1}, id="short-async"
    ),
]


@pytest.mark.parametrize("params", I2V_CASES)
def test_image_to_video_matches_diffusion_forcing_i2v_pipeline(
    skyreels_kit: SkyReelsKit,
    skyreels_sampler: StepLoopSampler,
    skyreels_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    rig = skyreels_rig(skyreels_kit.root, skyreels_sampler)
    image = first_frame_image(50, 40)  # another size and aspect than the render's: resized
    result = render(rig, tmp_path, image=image, **params)
    ours = take_frames(result)
    ref = reference_frames(skyreels_reference, image=image, **params)
    assert_parity(ours, ref, params.get("frames", 9))
    (take,) = result.takes
    assert take.params["image_to_video"] is True and "image" not in take.params
    # The image conditions the video: another image, another first frame (by more than the
    # parity tolerance; the tiny VAE's random weights carry an image only faintly).
    other = take_frames(render(rig, tmp_path, image=first_frame_image(50, 40, seed=1), **params))
    assert max_diff(other[:1], ours[:1]) > TOLERANCE


V2V_CASES = [
    pytest.param({"guidance": 1.0, "frames": 9, "base_frames": 9, "overlap": 5}, id="one-chunk"),
    pytest.param(
        {"guidance": 3.0, "frames": 17, "base_frames": 9, "overlap": 5, "ar_step": 1},
        id="long-async-cfg",
    ),
]


@pytest.mark.parametrize("params", V2V_CASES)
def test_extending_a_video_matches_diffusion_forcing_v2v_pipeline(
    skyreels_kit: SkyReelsKit,
    skyreels_sampler: StepLoopSampler,
    skyreels_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    rig = skyreels_rig(skyreels_kit.root, skyreels_sampler)
    given = source_video(13, 50, 40)  # another size than the render's: resized
    result = render(rig, tmp_path, video=given, **params)
    ours = take_frames(result)
    ref = reference_frames(skyreels_reference, video=given, **params)
    assert_parity(ours, ref, 13 + params["frames"])
    (take,) = result.takes
    assert take.params["extends_frames"] == 13 and "extend" not in take.params
