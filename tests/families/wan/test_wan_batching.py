"""Wan requests of one latent shape share transformer forwards in the step loop, and each still
renders what it renders alone; another shape runs in forwards of its own.

"What it renders alone" within a level or two on a few values: a forward over a batch of four
rows (two requests, each with its negative) is blocked differently by the CPU's kernels than one
over two, which moves a few floats by ulps before they are rounded to pixels.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from wan_harness import wan_rig

from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.server.server_support import wait_until

SPECS: list[dict[str, Any]] = [
    {"prompt": "a kite over the sea", "seed": 1, "guidance": 3.0, "steps": 12},
    {"prompt": "a train in the snow", "seed": 2, "guidance": 3.0, "steps": 8},
    {"prompt": "another size", "seed": 3, "guidance": 3.0, "steps": 6, "width": 32},
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
SHAPE = {"width": 48, "height": 32, "frames": 9, "format": "png"}


def all_in_loop(sampler: StepLoopSampler, count: int) -> bool | None:
    stats = sampler.stats()
    ready = stats["encodingJobs"] == 0 and stats["activeJobs"] + stats["queuedJobs"] == count
    return True if ready else None  # None: keep waiting


def frames(output: object) -> np.ndarray[Any, Any]:
    assert isinstance(output, Video)
    return output.frames


def test_same_shape_renders_share_forwards_and_equal_their_solo_renders(
    wan_kit: WanKit,
) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline()
        requests = [{**SHAPE, **spec} for spec in SPECS]
        solo = [frames(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in requests]
        assert sampler.stats()["batchedForwards"] == 0
        keys = [pipeline.request(**r).batch_key for r in requests]
        assert keys[0] == keys[1] != keys[2]  # the shape is part of the key
        # The loop is parked in its first forward until all three are in it, so which requests
        # meet in a forward does not depend on how fast this machine submits them.
        release = threading.Event()
        forward = pipeline.denoise_step

        def held(states: Sequence[Any], /) -> Any:
            release.wait(60.0)
            return forward(states)

        pipeline.denoise_step = held
        try:
            futures = [sampler.submit(SampleJob(pipeline, pipeline.request(**r))) for r in requests]
            wait_until(lambda: all_in_loop(sampler, len(requests)), "all three in the loop")
            release.set()
            together = [frames(f.result(timeout=300)) for f in futures]
        finally:
            release.set()
            del pipeline.denoise_step
        stats = sampler.stats()
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0
    # The first two shared forwards (each forward carries at most the two same-shape requests).
    assert stats["meanBatch"] > 1.0
    for alone, batched in zip(solo, together, strict=True):
        difference = np.abs(alone.astype(np.int16) - batched.astype(np.int16))
        assert int(difference.max()) <= TOLERANCE
        assert float((difference > 0).mean()) <= MAX_DIFFERING
