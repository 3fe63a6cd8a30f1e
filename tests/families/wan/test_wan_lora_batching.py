"""Wan requests with different LoRA stacks share forwards and render what each renders alone:
each row of the batched tensor gets its own stack, and no request's LoRA leaks into another's."""

from __future__ import annotations

from typing import Any

import numpy as np
from test_wan_batching import assert_same, solo_and_together
from wan_harness import wan_rig

from inline_core.families.wan.kit import WanKit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import Stack, picks

STACKS: list[Stack] = [
    [],
    [("a", 1.0)],
    [("b", 1.0)],
    [("a", 1.0), ("b", 1.0)],
    [("a", 0.5), ("b", 1.5)],
    [("a-comfy", 0.5)],
    [("b", -0.7)],
    [("a-kohya", 1.0), ("a", 0.25)],  # the same weights twice: their strengths add
]
SHAPE: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "format": "png"}


def test_eight_wan_requests_with_different_stacks_share_forwards_and_match_alone(
    wan_kit: WanKit,
) -> None:
    sampler = StepLoopSampler()
    try:
        rig = wan_rig(wan_kit.root, sampler)
        pipeline = rig.pipeline()
        requests = [
            {
                **SHAPE,
                "prompt": f"render {i}",
                "seed": i,
                "steps": 3,
                "guidance": 3.0,  # each negative row carries its request's stack too
                "loras": tuple(h.use for h in picks(rig, wan_kit, stack)),
            }
            for i, stack in enumerate(STACKS)
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0, stats
    assert_same(solo, together)
    plain = solo[0].astype(np.int16)
    for i in range(1, len(STACKS)):  # every stack changed its frames: no row got another's
        assert int(np.abs(solo[i].astype(np.int16) - plain).max()) > 0, STACKS[i]
