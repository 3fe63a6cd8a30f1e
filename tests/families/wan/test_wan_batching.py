"""Wan requests of one latent shape share transformer forwards in the step loop, and each still
renders what it renders alone; another shape runs in forwards of its own.

"What it renders alone" within a level or two on a few values: a forward over a batch of four
rows (two requests, each with its negative) is blocked differently by the CPU's kernels than one
over two, which moves a few floats by ulps before they are rounded to pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from wan_harness import first_frame_image, wan_rig

from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import Video
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together

SPECS: list[dict[str, Any]] = [
    {"prompt": "a kite over the sea", "seed": 1, "guidance": 3.0, "steps": 12},
    {"prompt": "a train in the snow", "seed": 2, "guidance": 3.0, "steps": 8},
    {"prompt": "another size", "seed": 3, "guidance": 3.0, "steps": 6, "width": 32},
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
SHAPE = {"width": 48, "height": 32, "frames": 9, "format": "png"}
IMAGES = [first_frame_image(64, 32, seed=1), first_frame_image(40, 40, seed=2)]


def frames(output: object) -> np.ndarray[Any, Any]:
    assert isinstance(output, Video)
    return output.frames


def solo_and_together(
    sampler: StepLoopSampler, pipeline: Any, requests: Sequence[dict[str, Any]]
) -> tuple[list[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]], dict[str, Any]]:
    """Each request rendered alone, then all together, and the loop's stats after."""
    solo = [frames(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in requests]
    assert sampler.stats()["batchedForwards"] == 0
    jobs = [SampleJob(pipeline, pipeline.request(**r)) for r in requests]
    together = [frames(output) for output in run_together(sampler, pipeline, jobs)]
    return solo, together, sampler.stats()


def assert_same(solo: list[np.ndarray[Any, Any]], together: list[np.ndarray[Any, Any]]) -> None:
    for alone, batched in zip(solo, together, strict=True):
        difference = np.abs(alone.astype(np.int16) - batched.astype(np.int16))
        assert int(difference.max()) <= TOLERANCE
        assert float((difference > 0).mean()) <= MAX_DIFFERING


def test_same_shape_renders_share_forwards_and_equal_their_solo_renders(
    wan_kit: WanKit,
) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline()
        requests = [{**SHAPE, **spec} for spec in SPECS]
        keys = [pipeline.request(**r).batch_key for r in requests]
        assert keys[0] == keys[1] != keys[2]  # the shape is part of the key
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0
    # The first two shared forwards (each forward carries at most the two same-shape requests).
    assert stats["meanBatch"] > 1.0
    assert_same(solo, together)


def test_ti2v_image_and_text_requests_share_forwards_and_equal_their_solo_renders(
    wan_kit: WanKit,
) -> None:
    """On the 5B, image-to-video and text-to-video requests of one shape are one batch: each
    row carries its own latents (an image's first frame in place) and per-token timesteps."""
    shape = {"width": 64, "height": 32, "frames": 9, "format": "png"}
    requests: list[dict[str, Any]] = [
        {**shape, "prompt": "a kite", "seed": 1, "guidance": 3.0, "steps": 5, "image": IMAGES[0]},
        {**shape, "prompt": "a train", "seed": 2, "guidance": 3.0, "steps": 4, "image": IMAGES[1]},
        {**shape, "prompt": "no image", "seed": 3, "guidance": 3.0, "steps": 3},
    ]
    sampler = StepLoopSampler()
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline("wan2.2_ti2v_tiny_fp32.safetensors")
        keys = {pipeline.request(**r).batch_key for r in requests}
        assert len(keys) == 1  # image or not, one shape: one key
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    assert_same(solo, together)
    assert int(np.abs(solo[0][0].astype(np.int16) - solo[1][0]).max()) > 8  # own first frames


def test_a14b_requests_batch_only_on_the_same_expert_and_equal_their_solo_renders(
    wan_kit: WanKit,
) -> None:
    """Two requests on the A14B pair at different steps: they share forwards while both are on
    one expert, and never a forward across the switch (the key follows it), each rendering what
    it renders alone. At shift 12 the 6-step request switches at its step 4, the 3-step one at
    its step 2: whether they start together or a step apart, one is on the low-noise expert
    while the other is still on the high-noise one."""
    from inline_core.families.wan.kit import A14B_BOUNDARY

    shape = {**SHAPE, "guidance": 3.0, "shift": 12.0, "boundary_ratio": A14B_BOUNDARY}
    requests: list[dict[str, Any]] = [
        {**shape, "prompt": "a kite", "seed": 1, "steps": 6},
        {**shape, "prompt": "a train", "seed": 2, "steps": 3, "guidance_2": 5.0},
    ]
    sampler = StepLoopSampler()
    experts: list[list[int]] = []
    try:
        pipeline = wan_rig(wan_kit.root, sampler).pipeline(
            "wan2.2_t2v_high_noise_tiny_fp32.safetensors"
        )
        forward = pipeline.denoise_step

        def recorded(states: Sequence[Any], /) -> Any:
            experts.append([int(s.expert) for s in states])
            return forward(states)

        pipeline.denoise_step = recorded  # wrapped again, and unwrapped, by solo_and_together
        try:
            solo, together, stats = solo_and_together(sampler, pipeline, requests)
        finally:
            cast(dict[str, Any], vars(pipeline)).pop("denoise_step", None)
    finally:
        sampler.close()
    assert_same(solo, together)
    solo_forwards = 6 + 3
    shared = experts[solo_forwards:]
    assert all(len(set(group)) == 1 for group in shared)  # never a forward across the switch
    assert any(len(group) == 2 for group in shared)  # and they shared while on one expert
    assert {0, 1} <= {e for group in shared for e in group}  # both experts ran
    assert sorted(e for group in experts[:6] for e in group) == [0] * 4 + [1] * 2
    assert stats["batchKeyChanges"] == 4  # each request switched once, alone and together
