"""LTX-2 LoRA parity: a render with a LoRA stack equals diffusers' LTX2Pipeline after
`load_lora_weights` + `set_adapters` with the same files, in diffusers' naming and in Lightricks'
(ComfyUI's, its official LoRAs'), converted by diffusers' own LTX-2 converter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import (
    ltx2_rig,
    max_diff,
    reference,
    render,
    solo_and_together,
    take_audio,
    take_frames,
)

from inline_core.contract.lora_stacks import lora_stack
from inline_core.diffusion.adapters.kit import KitLora, random_lora, write_lora
from inline_core.diffusion.adapters.naming import read_layout
from inline_core.errors import InvalidRequest
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.lora_naming import LTX2_LORAS
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import Stack, picks, reference_with

TOLERANCE = 2  # levels of 255, as the plain parity tests
MAX_DIFFERING = 0.01
AUDIO_TOLERANCE = 4.0 / 32767.0  # a few 16-bit steps, as the plain parity tests
RANK = 4
_ATTENTION = ("to_q", "to_k", "to_v", "to_out.0")
# A: the video's self-attention and feed-forward, the soundtrack's self-attention and the
# audio-to-video attention; B: the text cross-attentions, the video-to-audio attention and the
# soundtrack's feed-forward.
A_LAYERS = (
    *(
        f"{attn}.{p}"
        for attn in ("attn1", "audio_attn1", "audio_to_video_attn")
        for p in _ATTENTION
    ),
    "ff.net.0.proj",
    "ff.net.2",
)
B_LAYERS = (
    *(
        f"{attn}.{p}"
        for attn in ("attn2", "audio_attn2", "video_to_audio_attn")
        for p in _ATTENTION
    ),
    "audio_ff.net.0.proj",
    "audio_ff.net.2",
)


@dataclass(frozen=True)
class KitLoras:
    loras: Mapping[str, Path]


@pytest.fixture(scope="module")
def ltx2_loras(ltx2_kit: LTX2Kit) -> KitLoras:
    """Two random LoRAs of the kit's transformer in `loras/`: `a` in diffusers' naming (PEFT's
    alpha in its metadata) and in Lightricks' (`a-comfy`, the same weights), `b` on other
    layers."""
    from diffusers import LTX2VideoTransformer3DModel  # pyright: ignore[reportPrivateImportUsage]

    model: Any = LTX2VideoTransformer3DModel.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(ltx2_kit.diffusers_dir / "transformer"), local_files_only=True
    )
    blocks = len(model.transformer_blocks)
    a = random_lora(
        model, [f"transformer_blocks.{i}.{x}" for i in range(blocks) for x in A_LAYERS], RANK, 31
    )
    b = random_lora(
        model, [f"transformer_blocks.{i}.{x}" for i in range(blocks) for x in B_LAYERS], RANK, 32
    )
    folder = ltx2_kit.root / "loras"

    def write(lora: KitLora, name: str, prefix: str, peft_alpha: float | None = None) -> Path:
        path = folder / f"{name}.safetensors"
        down, up = ".lora_A.weight", ".lora_B.weight"
        return write_lora(lora, path, prefix.__add__, down=down, up=up, peft_alpha=peft_alpha)

    return KitLoras(
        {
            "a": write(a, "ltx2_lora_a", "transformer.", peft_alpha=8.0),
            "a-comfy": write(a, "ltx2_lora_a_comfy", "diffusion_model."),
            "b": write(b, "ltx2_lora_b", "transformer."),
        }
    )


STACKS = [
    pytest.param([("a", 1.0)], {"guidance": 1.0, "audio_guidance": 1.0}, id="one-lora"),
    pytest.param([("a-comfy", 1.0)], {"guidance": 1.0, "audio_guidance": 1.0}, id="comfyui-naming"),
    pytest.param(
        [("a", 0.8), ("b", 1.5)],
        {"guidance": 4.0, "audio_guidance": 7.0, "negative_prompt": "blurry, silent"},
        id="two-with-guidance",
    ),
]


@pytest.mark.parametrize(("stack", "params"), STACKS)
def test_ltx2_lora_render_matches_ltx2_pipeline(
    ltx2_kit: LTX2Kit,
    ltx2_loras: KitLoras,
    ltx2_sampler: StepLoopSampler,
    ltx2_reference: Any,
    tmp_path: Path,
    stack: Stack,
    params: dict[str, Any],
) -> None:
    rig = ltx2_rig(ltx2_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, loras=picks(rig, ltx2_loras, stack), **params)
    ours, sound = take_frames(result), take_audio(result)
    with reference_with(ltx2_reference, ltx2_loras, stack) as pipe:
        ref, ref_sound = reference(pipe, **params)
    plain, _plain_sound = reference(ltx2_reference, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    assert max_diff(ours, plain) > 10 * TOLERANCE  # the LoRA changed the frames
    reference_16 = np.round(np.clip(ref_sound.samples, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE


def test_a_lora_of_another_model_is_refused_by_name(tmp_path: Path) -> None:
    keys = ["diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight"]
    with pytest.raises(InvalidRequest, match="not a layer of LTX-2"):
        read_layout("flux.safetensors", keys, LTX2_LORAS)


def test_requests_with_different_stacks_share_forwards_and_equal_their_solo_renders(
    ltx2_kit: LTX2Kit, ltx2_loras: KitLoras
) -> None:
    """Each row of a batched forward gets its own request's stack (none, one, two at other
    strengths), its negative row too, and renders what it renders alone."""
    sampler = StepLoopSampler(token_budget=4096)  # the kit's 2x VAE: many tokens per pixel
    try:
        rig = ltx2_rig(ltx2_kit.root, sampler)
        pipeline: Any = rig.pipeline()
        stacks: list[Stack] = [[], [("a", 1.0)], [("a", 0.5), ("b", 1.5)]]
        requests = [
            {
                "width": 32,
                "height": 32,
                "frames": 5,
                "fps": 25,
                "format": "png",
                "prompt": "a kite over the sea",
                "seed": 1,
                "steps": 3,
                "guidance": 3.0,
                "loras": lora_stack(picks(rig, ltx2_loras, stack), "ltx2", "LTX-2", "l"),
            }
            for stack in stacks
        ]
        solo, together = solo_and_together(sampler, pipeline, requests)
        stats = sampler.stats()
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    for alone, batched in zip(solo, together, strict=True):
        assert max_diff(alone.frames.astype(np.int16), batched.frames.astype(np.int16)) <= TOLERANCE
    first, second = (v.frames.astype(np.int16) for v in solo[:2])
    assert max_diff(first, second) > 10 * TOLERANCE  # the stacks differ, and so do the renders
