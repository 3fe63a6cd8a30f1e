"""LTX-2 requests of one video shape share transformer forwards in the step loop (video and
audio latents advance together; an image-to-video row beside text-to-video ones), and each still
renders what it renders alone: frames within a level or two on a few values, the sound within a
few ulps (a forward over four rows is blocked differently by the CPU's kernels than one over
two). Another frame rate (so another soundtrack length) runs in forwards of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ltx2_harness import ltx2_rig, solo_and_together

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.runtime.video import Video
from inline_core.sampling.loop import StepLoopSampler

SHAPE = {"width": 32, "height": 32, "frames": 5, "fps": 25, "format": "png"}
SPECS: list[dict[str, Any]] = [
    {"prompt": "a kite over the sea", "seed": 1, "guidance": 3.0, "steps": 4},
    {
        "prompt": "a train in the snow",
        "seed": 2,
        "guidance": 3.0,
        "audio_guidance": 5.0,
        "steps": 3,
    },
    {"prompt": "another rate", "seed": 3, "guidance": 3.0, "steps": 2, "fps": 12},
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01
AUDIO_TOLERANCE = 1e-4


def test_same_shape_renders_share_forwards_and_equal_their_solo_renders(ltx2_kit: LTX2Kit) -> None:
    # The kit's VAE is 2x down, so its tokens are many for their pixels: a budget that holds
    # two (the CPU's default, 256, is sized for 16x-down latents).
    sampler = StepLoopSampler(token_budget=4096)
    try:
        pipeline = ltx2_rig(ltx2_kit.root, sampler).pipeline()
        requests = [{**SHAPE, **spec} for spec in SPECS]
        keys = [pipeline.request(**r).batch_key for r in requests]
        assert keys[0] == keys[1] != keys[2]  # the frame rate is part of the key
        solo, together = solo_and_together(sampler, pipeline, requests)
        stats = sampler.stats()
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    assert_batched_equal_solo(solo, together)
    assert solo[0].audio is not None and solo[2].audio is not None
    assert solo[2].audio.samples.shape[1] != solo[0].audio.samples.shape[1]  # its own length


def assert_batched_equal_solo(solo: Sequence[Video], together: Sequence[Video]) -> None:
    """Each take rendered in a batch as it did alone: its frames and its sound."""
    for alone, batched in zip(solo, together, strict=True):
        difference = np.abs(alone.frames.astype(np.int16) - batched.frames.astype(np.int16))
        assert int(difference.max()) <= TOLERANCE
        assert float((difference > 0).mean()) <= MAX_DIFFERING
        assert alone.audio is not None and batched.audio is not None
        heard = np.abs(alone.audio.samples - batched.audio.samples)
        assert float(heard.max()) <= AUDIO_TOLERANCE
