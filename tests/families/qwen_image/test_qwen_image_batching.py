"""Qwen-Image requests share forwards and render what each renders alone: prompts of any length
(padded under a mask), steps, guidance on and off in their own groups, sizes in their own
forwards, and each row's own LoRA stack; the LoRAs in every naming render what diffusers renders
with them loaded through PEFT."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qwen_harness import (
    TEXT_MODEL,
    max_diff,
    pixels,
    qwen_rig,
    reference_image,
    render,
    take_pixels,
)

from inline_core.families.qwen_image.kit import KitPaths
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import all_in_loop
from tests.families.zimage.lora_harness import Stack, picks, reference_with
from tests.server.server_support import wait_until

# Rows padded to a longer prompt run under a mask (alone: none), so float ordering may move a
# level, never more.
TOLERANCE = 1


def solo_and_together(
    sampler: StepLoopSampler, pipeline: Any, requests: Sequence[dict[str, Any]]
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Each request rendered alone, then all together (the loop held at a boundary until every
    one is in it), and the loop's stats after."""
    solo = [pixels(sampler.run(SampleJob(pipeline, pipeline.request(**r)))) for r in requests]
    assert sampler.stats()["batchedForwards"] == 0
    # The loop thread waits at a boundary while every job is encoded and queued, so all of them
    # are there to share forwards when it goes on.
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        release.wait(300)

    sampler.call_soon(hold)
    # Held before the first job arrives: the loop admits all of them at its next boundary.
    assert holding.wait(60), "the step loop did not take the call"
    try:
        futures = [sampler.submit(SampleJob(pipeline, pipeline.request(**r))) for r in requests]
        wait_until(lambda: all_in_loop(sampler, len(requests)), "all of them in the loop")
    finally:
        release.set()
    together = [pixels(f.result(timeout=300)) for f in futures]
    return solo, together, sampler.stats()


STACKS: list[Stack] = [[], [("a", 1.0)], [("b", 0.8)], [("a-kohya", 0.5), ("b", 1.0)]]


def test_mixed_prompts_steps_sizes_and_stacks_share_forwards_and_match_alone(
    qwen_kit: KitPaths,
) -> None:
    sampler = StepLoopSampler()
    try:
        rig = qwen_rig(qwen_kit.root, sampler)
        pipeline = rig.pipeline(TEXT_MODEL)
        requests: list[dict[str, Any]] = [
            {
                "prompt": "word " * (1 + 5 * i),  # every prompt a different length
                "width": 64,
                "height": 64,
                "seed": i,
                "steps": 2 + i % 2,
                "guidance": 1.0 if i % 2 else 3.0,
                "loras": tuple(h.use for h in picks(rig, qwen_kit, stack)),
            }
            for i, stack in enumerate(STACKS)
        ]
        requests.append({**requests[0], "width": 96, "height": 48, "prompt": "another size"})
        keys = [pipeline.request(**r).batch_key for r in requests]
        assert keys[0] == keys[2] != keys[1] and keys[-1] != keys[0]
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    # Admitted at one boundary, the two pairs of equal keys share every step: 2 + 3 forwards.
    assert stats["batchedForwards"] == 5 and stats["meanBatch"] > 1.0, stats
    for alone, batched in zip(solo, together, strict=True):
        assert max_diff(alone, batched) <= TOLERANCE


@pytest.mark.parametrize("key", ["a", "a-comfy", "a-kohya", "a-lightning"])
def test_each_lora_naming_renders_what_diffusers_renders(
    qwen_kit: KitPaths,
    qwen_sampler: StepLoopSampler,
    text_reference: Any,
    tmp_path: Path,
    key: str,
) -> None:
    rig = qwen_rig(qwen_kit.root, qwen_sampler)
    stack: Stack = [(key, 0.7)]
    params: dict[str, Any] = {"guidance": 2.0, "negative_prompt": "grey"}
    ours = take_pixels(
        render(rig, tmp_path, model=TEXT_MODEL, loras=picks(rig, qwen_kit, stack), **params)
    )
    with reference_with(text_reference, qwen_kit, [("a", 0.7)]) as pipe:
        ref = reference_image(pipe, **params)
    plain = reference_image(text_reference, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert max_diff(ref, plain) > 2  # the LoRA matters
    assert np.asarray(ours).std() > 1.0
