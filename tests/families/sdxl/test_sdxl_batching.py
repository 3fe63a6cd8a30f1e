"""SDXL requests of one latent size share UNet forwards in the step loop, with different
samplers, schedules, prompts (one of two 77-token windows beside ones of one), LoRA stacks,
guidance or none, and each still renders what it renders alone; another size runs in forwards
of its own.

"What it renders alone" within a level or two on a few values: a forward over a batch of five
rows is blocked differently by the CPU's kernels than one over two, which moves a few floats by
ulps before they are rounded to pixels.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image
from sdxl_harness import kit_lora, sdxl_rig

from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import all_in_loop
from tests.families.batching_harness import assert_batched_equals_alone
from tests.server.server_support import wait_until

LONG = " ".join(["a lighthouse on a cliff at dusk"] * 4)  # two windows of 77
SIZE = {"width": 64, "height": 64}
SPECS: list[dict[str, Any]] = [
    {"prompt": "a kite", "seed": 1, "guidance": 5.0, "steps": 4, "sampler": "euler"},
    {
        "prompt": LONG,
        "seed": 2,
        "guidance": 3.0,
        "steps": 5,
        "sampler": "dpmpp_2m",
        "schedule": "karras",
    },
    {"prompt": "a (train:1.4)", "seed": 3, "guidance": 1.0, "steps": 3, "sampler": "heun"},
    {"prompt": "another size", "seed": 4, "guidance": 5.0, "steps": 3, "width": 96},
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.02  # share of channel values allowed to differ at all


def pixels(output: object) -> np.ndarray[Any, Any]:
    assert isinstance(output, Image.Image)
    return np.asarray(output.convert("RGB")).astype(np.int16)


def solo_and_together(
    sampler: StepLoopSampler, pipeline: Any, requests: Sequence[dict[str, Any]]
) -> tuple[list[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]], dict[str, Any]]:
    solo = [pixels(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in requests]
    assert sampler.stats()["batchedForwards"] == 0
    # The loop is parked in its first forward until all are in it, so which requests meet in a
    # forward does not depend on how fast this machine submits them.
    release = threading.Event()
    forward = pipeline.denoise_step

    def held(states: Sequence[Any], /) -> Any:
        release.wait()
        return forward(states)

    pipeline.denoise_step = held
    try:
        futures = [sampler.submit(SampleJob(pipeline, pipeline.request(**r))) for r in requests]
        wait_until(lambda: all_in_loop(sampler, len(requests)), "all of them in the loop")
        release.set()
        together = [pixels(f.result(timeout=300)) for f in futures]
    finally:
        release.set()
        del pipeline.denoise_step
    return solo, together, sampler.stats()


def assert_shared_and_each_alone(
    solo: Sequence[np.ndarray[Any, Any]],
    together: Sequence[np.ndarray[Any, Any]],
    stats: dict[str, Any],
) -> None:
    assert_batched_equals_alone(solo, together, stats, TOLERANCE, MAX_DIFFERING)


def test_one_size_shares_forwards_and_each_render_equals_its_solo_render(
    sdxl_kit: SDXLKit,
) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = sdxl_rig(sdxl_kit.root, sampler).pipeline(sdxl_kit.checkpoint_name)
        requests = [{**SIZE, **spec} for spec in SPECS]
        keys = [pipeline.request(**r).batch_key for r in requests]
        assert keys[0] == keys[1] == keys[2] != keys[3]  # the size is part of the key
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert_shared_and_each_alone(solo, together, stats)
    assert int(np.abs(solo[0] - solo[1]).max()) > 8  # different renders, not one repeated


def test_requests_with_different_loras_share_forwards_and_equal_their_solo_renders(
    sdxl_kit: SDXLKit,
) -> None:
    sampler = StepLoopSampler()
    try:
        rig = sdxl_rig(sdxl_kit.root, sampler)
        pipeline = rig.pipeline(sdxl_kit.checkpoint_name)
        a = kit_lora(rig, sdxl_kit.loras["a"], 0.9, 0.6).use
        b = kit_lora(rig, sdxl_kit.loras["b"], 1.2).use
        base = {**SIZE, "prompt": "a kite", "steps": 4, "guidance": 5.0}
        requests: list[dict[str, Any]] = [
            {**base, "seed": 1, "loras": (a,)},
            {**base, "seed": 1, "loras": (b,)},
            {**base, "seed": 1},
            {**base, "seed": 2, "loras": (a, b), "guidance": 1.0, "sampler": "dpmpp_2m"},
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert_shared_and_each_alone(solo, together, stats)
    # One seed and prompt: each stack renders its own picture.
    assert int(np.abs(solo[0] - solo[2]).max()) > 8 and int(np.abs(solo[1] - solo[2]).max()) > 8
