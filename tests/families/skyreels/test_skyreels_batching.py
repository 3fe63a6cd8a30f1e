"""Two long SkyReels-V2 renders share the step loop's forwards while they are at different chunks
(their windows have one shape), and each equals its solo render.

A render of 2 steps a chunk is on its second chunk after two forwards, while one of 4 steps is
still on its first: the forwards they share from then on hold rows of two chunks, each with its
own frames' timesteps and prefix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from skyreels_harness import LONG, skyreels_rig
from skyreels_harness import video_frames as frames

from inline_core.families.skyreels.kit import FOLDER, SkyReelsKit
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together

SHAPE: dict[str, Any] = {"width": 48, "height": 32, "format": "png", "guidance": 1.0, **LONG}
REQUESTS: list[dict[str, Any]] = [
    {**SHAPE, "prompt": "a kite over the sea", "seed": 1, "steps": 2},
    {**SHAPE, "prompt": "a train in the snow", "seed": 2, "steps": 4},
]
TOLERANCE = 2  # levels of 255: a batch of two blocks its kernels differently (a few ulps)
MAX_DIFFERING = 0.01


def test_long_renders_at_different_chunks_share_forwards_and_equal_their_solo_renders(
    skyreels_kit: SkyReelsKit,
) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline: Any = skyreels_rig(skyreels_kit.root, sampler).pipeline(FOLDER)
        solo = [frames(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in REQUESTS]
        chunks_met: list[set[int]] = []

        def met(states: Sequence[Any]) -> None:
            if len(states) > 1:
                chunks_met.append({s.chunk for s in states})

        jobs = [SampleJob(pipeline, pipeline.request(**r)) for r in REQUESTS]
        together = [frames(out) for out in run_together(sampler, pipeline, jobs, on_forward=met)]
        stats = sampler.stats()
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0
    assert any(len(met) == 2 for met in chunks_met), chunks_met  # rows of two chunks, together
    for alone, batched in zip(solo, together, strict=True):
        difference = np.abs(alone - batched)
        assert int(difference.max()) <= TOLERANCE
        assert float((difference > 0).mean()) <= MAX_DIFFERING
