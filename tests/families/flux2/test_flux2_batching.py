"""FLUX.2 requests of one latent shape and one set of reference shapes share transformer
forwards in the step loop, each rendering what it renders alone; another shape runs apart.

"What it renders alone" within a level on a few values: a batched forward is blocked differently
by the CPU's kernels than one over a single row, which moves floats by ulps before rounding."""

from __future__ import annotations

from typing import Any

from flux2_harness import make_rig, picture, pixels

from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.families.standalone import FamilyRig
from inline_core.sampling.loop import StepLoopSampler
from tests.families.batching_harness import assert_batched_equals_alone, solo_and_together
from tests.families.zimage.lora_harness import Stack, picks

TOLERANCE = 2
MAX_DIFFERING = 0.01
REFERENCE = picture(96, 64, 4)


def stack(rig: FamilyRig, kit: Flux2DevKit, picked: Stack) -> tuple[LoraUse, ...]:
    """A request's LoRA stack, as the node passes its picked LoRAs on."""
    return tuple(handle.use for handle in picks(rig, kit, picked))


def test_same_shapes_share_forwards_and_equal_their_solo_renders(flux2_kit: Flux2Kit) -> None:
    sampler = StepLoopSampler()
    try:
        rig = make_rig(flux2_kit.root, sampler)
        pipeline = rig.pipeline("flux2_klein_base_tiny.safetensors")
        shape: dict[str, Any] = {"width": 64, "height": 64, "guided": True}
        requests: list[dict[str, Any]] = [
            {**shape, "prompt": "a kite", "seed": 1, "steps": 4, "guidance": 3.0},
            {**shape, "prompt": "a train", "seed": 2, "steps": 3, "guidance": 4.0},
            {
                **shape,
                "prompt": "a boat",
                "seed": 3,
                "steps": 3,
                "guidance": 3.0,
                "image": REFERENCE,
            },
            {
                **shape,
                "prompt": "a bird",
                "seed": 4,
                "steps": 2,
                "guidance": 3.0,
                "image": REFERENCE,
            },
            {**shape, "prompt": "wider", "seed": 5, "steps": 2, "guidance": 3.0, "width": 96},
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests, pixels)
    finally:
        sampler.close()
    assert_batched_equals_alone(solo, together, stats, TOLERANCE, MAX_DIFFERING)


def test_the_batch_key_holds_the_shapes(flux2_kit: Flux2Kit) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = make_rig(flux2_kit.root, sampler).pipeline("flux2_klein_tiny.safetensors")
        plain = pipeline.request(prompt="a", width=64, height=64, steps=2, guidance=1.0, seed=1)
        other = pipeline.request(prompt="b", width=64, height=64, steps=3, guidance=1.0, seed=2)
        wide = pipeline.request(prompt="c", width=96, height=64, steps=2, guidance=1.0, seed=3)
        assert plain.batch_key == other.batch_key != wide.batch_key
        plain.reference_shapes = ((4, 6),)  # as prepare sets it for a reference image
        assert plain.batch_key != other.batch_key
    finally:
        sampler.close()


def test_dev_requests_at_different_guidance_share_forwards(flux2_dev_kit: Flux2DevKit) -> None:
    """dev's guidance is an input per row: requests at different guidance share a forward and
    each renders what it renders alone; so do their LoRAs, the Turbo one's included (it adapts
    the time, guidance and modulation layers too, whose inputs are one row a request)."""
    sampler = StepLoopSampler()
    try:
        rig = make_rig(flux2_dev_kit.root, sampler)
        pipeline = rig.pipeline("flux2_dev_tiny.safetensors")
        shape: dict[str, Any] = {"width": 64, "height": 64, "embedded_guidance": True}
        requests: list[dict[str, Any]] = [
            {**shape, "prompt": "a kite", "seed": 1, "steps": 3, "guidance": 2.0},
            {**shape, "prompt": "a train", "seed": 2, "steps": 3, "guidance": 6.0},
            {**shape, "prompt": "a boat", "seed": 3, "steps": 2, "guidance": 4.0},
            {**shape, "prompt": "a cat", "seed": 4, "steps": 3, "guidance": 4.0,
             "loras": stack(rig, flux2_dev_kit, [("turbo", 1.0)])},
            {**shape, "prompt": "a dog", "seed": 5, "steps": 2, "guidance": 3.0,
             "loras": stack(rig, flux2_dev_kit, [("turbo", 0.5), ("a", 0.7)])},
        ]  # fmt: skip
        solo, together, stats = solo_and_together(sampler, pipeline, requests, pixels)
    finally:
        sampler.close()
    assert_batched_equals_alone(solo, together, stats, TOLERANCE, MAX_DIFFERING)


def test_the_sample_primitives_requests_share_forwards_and_equal_their_solo_renders(
    flux2_kit: Flux2Kit,
) -> None:
    """What `sample` asks of the denoiser (img2img from latents at a denoise, a noise mask, a
    KSamplerAdvanced window) rides the same forwards as a plain render, each row its own."""
    import torch

    from inline_core.components.interfaces import Latents

    start = torch.randn((1, 128, 4, 4), generator=torch.Generator("cpu").manual_seed(9))
    latents = Latents(start, tuple(start.shape))
    mask = torch.zeros((1, 1, 64, 64))
    mask[..., :32] = 1.0  # the left half repaints
    sampler = StepLoopSampler()
    try:
        pipeline = make_rig(flux2_kit.root, sampler).pipeline("flux2_klein_tiny.safetensors")
        shape: dict[str, Any] = {"width": 64, "height": 64, "guidance": 1.0, "steps": 3}
        requests: list[dict[str, Any]] = [
            {**shape, "prompt": "a kite", "seed": 1},
            {**shape, "prompt": "a train", "seed": 2, "start": latents, "denoise": 0.6},
            {**shape, "prompt": "a boat", "seed": 3, "start": latents, "noise_mask": mask},
            {**shape, "prompt": "a bird", "seed": 4, "end_step": 2, "leftover_noise": True},
        ]
        solo, together, stats = solo_and_together(sampler, pipeline, requests, pixels)
    finally:
        sampler.close()
    assert_batched_equals_alone(solo, together, stats, TOLERANCE, MAX_DIFFERING)
