"""LoRA parity: a Z-Image render with a LoRA stack equals diffusers' ZImagePipeline after
`load_lora_weights` + `set_adapters` with the same files, in each naming the kit writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lora_harness import Stack, picks, reference_with
from zimage_harness import make_runner, max_diff, pixels, reference_kwargs, render, take_pixels

from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 3  # as the plain parity tests: float ordering may move a channel by a level or so

PARAMS: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "guidance": 0.0}

STACKS = [
    pytest.param([("a", 1.0)], id="one-lora"),
    pytest.param([("a", 0.8), ("b", 0.5)], id="two-at-different-strengths"),
    pytest.param([("a-kohya", 1.0)], id="kohya-naming"),
    pytest.param([("a-ai-toolkit", 0.7)], id="ai-toolkit-naming"),
]


@pytest.mark.parametrize("stack", STACKS)
def test_lora_render_matches_diffusers(
    kit: KitPaths,
    sampler: StepLoopSampler,
    reference_pipe: Any,
    tmp_path: Path,
    stack: Stack,
) -> None:
    prompt = "a lighthouse at dusk"
    runner = make_runner(kit.root, sampler)
    ours = take_pixels(render(runner, tmp_path, prompt, loras=picks(runner, kit, stack), **PARAMS))
    with reference_with(reference_pipe, kit, stack) as pipe:
        ref = pipe(prompt=prompt, **reference_kwargs(PARAMS)).images[0]
    plain = reference_pipe(prompt=prompt, **reference_kwargs(PARAMS)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, pixels(plain)) > 10 * TOLERANCE  # the LoRA changed the picture


def test_lora_with_guidance_matches_diffusers(
    kit: KitPaths, sampler: StepLoopSampler, reference_pipe: Any, tmp_path: Path
) -> None:
    """With CFG the negative rows carry the request's stack too, as diffusers' batch does."""
    params: dict[str, Any] = {**PARAMS, "guidance": 3.0, "negative_prompt": "blurry"}
    stack: Stack = [("a", 1.0), ("b", 1.5)]
    runner = make_runner(kit.root, sampler)
    ours = take_pixels(render(runner, tmp_path, "a cat", loras=picks(runner, kit, stack), **params))
    with reference_with(reference_pipe, kit, stack) as pipe:
        ref = pipe(prompt="a cat", **reference_kwargs(params)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
