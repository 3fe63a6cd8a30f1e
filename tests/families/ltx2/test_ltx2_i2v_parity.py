"""Image-to-video parity: an LTX-2 take from a first frame equals what diffusers'
`LTX2ImageToVideoPipeline` renders from the same tiny weights, image, seed and params (the image
re-compressed at the model's conditioning CRF, stretched to the size, kept clean as the first
latent frame); tolerances as in the text-to-video parity test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import (
    first_frame_image,
    ltx2_rig,
    max_diff,
    reference,
    render,
    take_audio,
    take_frames,
)

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.sampling.loop import StepLoopSampler

CASES = [
    pytest.param({"guidance": 1.0, "audio_guidance": 1.0}, id="nocfg"),
    pytest.param({"guidance": 4.0, "audio_guidance": 7.0, "negative_prompt": "blurry"}, id="cfg"),
]
TOLERANCE = 2
MAX_DIFFERING = 0.01
AUDIO_TOLERANCE = 4 / 32767.0


@pytest.mark.parametrize("params", CASES)
def test_image_to_video_with_sound_matches_ltx2_image_to_video_pipeline(
    ltx2_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx2_reference: Any,
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    image = first_frame_image(48, 40, seed=5)  # stretched to 32x32, as diffusers does
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, image=image, **params)
    ours, sound = take_frames(result), take_audio(result)
    ref, ref_sound = reference(ltx2_reference, image=image, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    reference_16 = np.round(np.clip(ref_sound.samples, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE
    assert result.takes[0].params["image_to_video"] is True
    text_only = take_frames(render(rig, tmp_path, **params))
    assert max_diff(ours, text_only) > 8  # the image changed the video
