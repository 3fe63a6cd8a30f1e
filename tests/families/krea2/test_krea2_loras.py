"""LoRA parity: a Krea 2 render with a LoRA stack equals diffusers' Krea2Pipeline after
`load_lora_weights` + `set_adapters` with the same files, in diffusers' naming and Krea's (rows
with other stacks batched together: `test_krea2_batching.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from krea2_harness import render, rig

from inline_core.families.krea2.kit import Krea2Kit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import Stack, picks, reference_with

TOLERANCE = 1
PARAMS: dict[str, Any] = {"width": 48, "height": 48, "steps": 2, "guidance": 2.0, "seed": 6}

STACKS = [
    pytest.param([("a", 1.0)], id="attention"),
    pytest.param([("a", 0.7), ("b", 1.2)], id="two-at-different-strengths"),
    pytest.param([("b-krea", 1.0)], id="krea-naming"),
]


def reference(pipe: Any) -> np.ndarray[Any, Any]:
    import torch

    image = pipe(
        prompt="a fox",
        width=48,
        height=48,
        num_inference_steps=2,
        guidance_scale=2.0,
        generator=torch.Generator("cpu").manual_seed(6),
    ).images[0]
    return np.asarray(image.convert("RGB"), dtype=np.int16)


@pytest.mark.parametrize("stack", STACKS)
def test_lora_render_matches_krea2_pipeline(
    krea2_kit: Krea2Kit,
    krea_sampler: StepLoopSampler,
    krea_pipe: Any,
    tmp_path: Path,
    stack: Stack,
) -> None:
    r = rig(krea2_kit, krea_sampler)
    ours = render(r, tmp_path, "a fox", loras=picks(r, krea2_kit, stack), **PARAMS)
    with reference_with(krea_pipe, krea2_kit, stack) as pipe:
        theirs = reference(pipe)
    plain = render(r, tmp_path, "a fox", **PARAMS)
    assert int(np.abs(ours - theirs).max()) <= TOLERANCE
    assert int(np.abs(ours - plain).max()) > 10 * TOLERANCE  # the LoRA changed the picture
