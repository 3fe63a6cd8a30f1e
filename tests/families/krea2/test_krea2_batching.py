"""Krea 2 requests of one latent shape and one guidance mode share transformer forwards in the
step loop, each rendering what it renders alone, with its own LoRA stack; another shape runs
apart.

"What it renders alone" within a level on a few values: a batched forward is blocked differently
by the CPU's kernels than one over a single row, which moves floats by ulps before rounding."""

from __future__ import annotations

from typing import Any

import numpy as np
from krea2_harness import rig

from inline_core.contract.lora_stacks import lora_stack
from inline_core.families.krea2.kit import TEXT_LAYERS, Krea2Kit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.batching_harness import assert_batched_equals_alone, solo_and_together
from tests.families.zimage.lora_harness import picks

TOLERANCE = 2
MAX_DIFFERING = 0.01


def pixels(image: Any) -> np.ndarray[Any, Any]:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_same_shapes_share_forwards_and_equal_their_solo_renders(krea2_kit: Krea2Kit) -> None:
    sampler = StepLoopSampler()
    try:
        r = rig(krea2_kit, sampler)
        stack = lora_stack(picks(r, krea2_kit, [("b-krea", 1.0)]), "krea-2", "Krea 2", "k")
        pipeline = r.pipeline("krea2_tiny.safetensors")
        shape: dict[str, Any] = {"width": 48, "height": 48, "text_layers": TEXT_LAYERS}
        requests: list[dict[str, Any]] = [
            {**shape, "prompt": "a kite", "seed": 1, "steps": 3, "guidance": 2.0},
            {**shape, "prompt": "a train", "seed": 2, "steps": 2, "guidance": 4.0, "loras": stack},
            {
                **shape,
                "prompt": "a boat",
                "negative_prompt": "fog",
                "seed": 3,
                "steps": 2,
                "guidance": 3.0,
            },
            {**shape, "prompt": "unguided", "seed": 4, "steps": 2, "guidance": 0.0},
            {**shape, "prompt": "wider", "seed": 5, "steps": 2, "guidance": 2.0, "width": 64},
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests, pixels)
    finally:
        sampler.close()
    assert_batched_equals_alone(solo, together, stats, TOLERANCE, MAX_DIFFERING)
