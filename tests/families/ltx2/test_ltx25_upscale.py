"""LTX-2.5's two-stage `upscale`: a first pass at half the size, the latent upsampler, a refining
pass, then the diffusion video decoder drawing from the refining pass's generator. Parity on the
tiny LTX-2.5 folder against diffusers' classes chained the same way: `LTX2Pipeline` (latents out)
-> `LTX2LatentUpsamplePipeline` -> `LTX2Pipeline` on the distilled sigmas (latents out) ->
`LTX2VideoDiffusionDecodePipeline` with that pass's generator; the soundtrack is the refining
pass's own. Tolerances as LTX-2.0's two-stage path (`test_ltx2_upscale.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ltx2_harness import (
    Pixels,
    first_frame_image,
    ltx2_rig,
    max_diff,
    render,
    take_audio,
    take_frames,
    uint8_frames,
)
from test_ltx2_upscale import AUDIO_TOLERANCE, RENDER, TOLERANCE, chained, diffusers_chain

from inline_core.diffusion.libs import module
from inline_core.families.ltx2.descriptor import UPSCALE_CATEGORY
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.kit_ltx25 import FOLDER, UPSAMPLER
from inline_core.sampling.loop import StepLoopSampler


@pytest.fixture(scope="module")
def ltx25_upsampler(ltx25_kit: LTX2Kit) -> Any:
    """The kit's latent upsampler, in `latent_upscale_models/` as ComfyUI's 2.5 templates put it."""
    ltx2: Any = module("diffusers.pipelines.ltx2.latent_upsampler")
    folder = ltx25_kit.root / UPSCALE_CATEGORY / UPSAMPLER
    return ltx2.LTX2LatentUpsamplerModel.from_pretrained(str(folder), local_files_only=True).eval()


def diffusers_ltx25_chain(
    pipes: tuple[Any, Any], upsampler: Any, image: Any = None
) -> tuple[Pixels, np.ndarray[Any, Any], Pixels]:
    """diffusers' frames through the diffusion decoder, the refining pass's soundtrack, and the
    frames its convolutional VAE would decode."""
    pipe, decode = pipes
    vae_frames, sound = diffusers_chain(pipe, upsampler, None, image)
    generator = torch.Generator("cpu").manual_seed(RENDER["seed"])
    latents, _ = chained(pipe, upsampler, None, image, generator, output_type="latent")
    video = decode(latents, generator=generator, output_type="np", denormalize=False)
    return uint8_frames(video.frames[0]), sound, vae_frames


@pytest.mark.parametrize("from_image", [False, True], ids=["text", "image"])
def test_ltx25_two_stage_render_equals_diffusers_chained_classes(
    ltx25_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx25_reference: tuple[Any, Any],
    ltx25_upsampler: Any,
    tmp_path: Path,
    from_image: bool,
) -> None:
    image = first_frame_image(48, 40, seed=5) if from_image else None
    rig = ltx2_rig(ltx25_kit.root, ltx2_sampler)
    params = {k: v for k, v in RENDER.items() if k != "prompt"}
    if image is not None:
        params["image"] = image
    result = render(
        rig, tmp_path, model=FOLDER, upscale=True, audio_guidance=RENDER["guidance"], **params
    )
    frames, sound = take_frames(result), take_audio(result)
    want, want_sound, vae_frames = diffusers_ltx25_chain(ltx25_reference, ltx25_upsampler, image)
    assert frames.shape == want.shape == (5, 64, 64, 3)
    assert max_diff(frames, vae_frames) > 10  # the diffusion decoder decoded it, not the VAE
    assert max_diff(frames, want) <= TOLERANCE
    assert frames.std() > 1.0
    reference_16 = np.round(np.clip(want_sound, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE
    assert result.takes[0].params["upscale"] is True
