"""LTX-2.5 requests of one video shape share forwards and each still renders what it renders
alone: its diffusion decoder draws from its own request's generator, whoever shared its
forwards, with `upscale` too (on its template's recipe). Compared as LTX-2.0's
(`test_ltx2_batching.py`)."""

from __future__ import annotations

import numpy as np
from ltx2_harness import ltx2_rig, solo_and_together
from test_ltx2_batching import SHAPE, SPECS, assert_batched_equal_solo

from inline_core.families.ltx2.descriptor import UPSCALE_CATEGORY
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.kit_ltx25 import UPSAMPLER
from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER
from inline_core.families.ltx2.manual_sigmas import parse_sigmas
from inline_core.families.ltx2.versions import LTX25, VERSIONS
from inline_core.sampling.loop import StepLoopSampler


def test_ltx25_batched_renders_equal_their_solo_renders(ltx25_kit: LTX2Kit) -> None:
    sampler = StepLoopSampler(token_budget=4096)  # two of the kit's 2x-down renders a forward
    decoder = str(ltx25_kit.diffusers_dir / DECODER_SUBFOLDER)
    try:
        pipeline = ltx2_rig(ltx25_kit.root, sampler).pipeline()
        requests = [{**SHAPE, **spec, "diffusion_decoder": decoder} for spec in SPECS[:2]]
        solo, together = solo_and_together(sampler, pipeline, requests)
        stats = sampler.stats()
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0 and stats["meanBatch"] > 1.0
    assert int(np.abs(solo[0].frames.astype(np.int16) - solo[1].frames).max()) > 10
    assert_batched_equal_solo(solo, together)


def test_ltx25_two_stage_renders_batched_equal_their_solo_renders(ltx25_kit: LTX2Kit) -> None:
    """With `upscale` on the 2.5 template's recipe (versions.py: both passes euler_ancestral,
    unguided), each request's sampler noise and decoder draw from its own generators."""
    sampler = StepLoopSampler(token_budget=8192)  # two refining passes (64x64) a forward
    decoder = str(ltx25_kit.diffusers_dir / DECODER_SUBFOLDER)
    upsampler = str(ltx25_kit.root / UPSCALE_CATEGORY / UPSAMPLER)
    recipe = VERSIONS[LTX25]
    first_sigmas = parse_sigmas(recipe.first_sigmas, "test")
    two_stage = {
        "upscale": True,
        "upsampler": upsampler,
        "diffusion_decoder": decoder,
        "sampler": recipe.sampler,
        "first_sigmas": first_sigmas,
        "steps": len(first_sigmas),
        "guidance": recipe.guidance,
        "audio_guidance": recipe.guidance,
        "refine_sigmas": recipe.refine_sigmas,
        "refine_sampler": recipe.refine_sampler,
    }
    try:
        pipeline = ltx2_rig(ltx25_kit.root, sampler).pipeline()
        requests = [{**SHAPE, **spec, **two_stage, "width": 64, "height": 64} for spec in SPECS[:2]]
        solo, together = solo_and_together(sampler, pipeline, requests)
        stats = sampler.stats()
    finally:
        sampler.close()
    assert stats["batchedForwards"] > 0
    assert solo[0].frames.shape[1:3] == (64, 64)
    assert int(np.abs(solo[0].frames.astype(np.int16) - solo[1].frames).max()) > 10
    assert_batched_equal_solo(solo, together)
