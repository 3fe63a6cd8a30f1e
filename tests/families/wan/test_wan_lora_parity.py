"""Wan LoRA parity: a Wan render with a LoRA stack equals diffusers' WanPipeline after
`load_lora_weights` + `set_adapters` with the same files, in each naming the kit writes (the
ComfyUI, ai-toolkit and musubi-tuner ones converted by diffusers' own Wan converters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wan_harness import max_diff, reference_frames, render, take_frames, wan_rig

from inline_core.families.wan.kit import WanKit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import Stack, picks, reference_with

TOLERANCE = 2  # levels of 255, as the plain Wan parity tests
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
MODEL = "wan2.1_t2v_tiny_diffusers"  # diffusers' own weights: the same ops as the reference

STACKS = [
    pytest.param([("a", 1.0)], id="one-lora"),
    pytest.param([("a", 0.8), ("b", 0.5)], id="two-at-different-strengths"),
    pytest.param([("a-comfy", 1.0)], id="comfyui-naming"),
    pytest.param([("a-ai-toolkit", 1.5)], id="ai-toolkit-naming"),
    pytest.param([("a-kohya", 1.2)], id="musubi-tuner-naming"),
]


def assert_matches(ours: Any, ref: Any) -> None:
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING


@pytest.mark.parametrize("stack", STACKS)
def test_wan_lora_render_matches_wan_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    wan_reference: Any,
    tmp_path: Path,
    stack: Stack,
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    params: dict[str, Any] = {"guidance": 1.0}
    loras = picks(rig, wan_kit, stack)
    ours = take_frames(render(rig, tmp_path, model=MODEL, loras=loras, **params))
    with reference_with(wan_reference, wan_kit, stack) as pipe:
        ref = reference_frames(pipe, **params)
    plain = reference_frames(wan_reference, **params)
    assert_matches(ours, ref)
    assert max_diff(ours, plain) > 10 * TOLERANCE  # the LoRA changed the frames


def test_wan_lora_with_guidance_matches_wan_pipeline(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, wan_reference: Any, tmp_path: Path
) -> None:
    """With CFG the negative rows carry the request's stack too, as diffusers' second forward
    does; the ComfyUI file renders as diffusers' own folder does."""
    params: dict[str, Any] = {"guidance": 4.0, "negative_prompt": "blurry, static"}
    stack: Stack = [("a", 1.0), ("b", 1.5)]
    rig = wan_rig(wan_kit.root, wan_sampler)
    loras = picks(rig, wan_kit, stack)
    ours = take_frames(
        render(rig, tmp_path, model="wan2.1_t2v_tiny_fp32.safetensors", loras=loras, **params)
    )
    with reference_with(wan_reference, wan_kit, stack) as pipe:
        ref = reference_frames(pipe, **params)
    assert_matches(ours, ref)
