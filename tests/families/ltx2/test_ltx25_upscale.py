"""LTX-2.5's two-stage `upscale`: a first pass at half the size, the latent upsampler, a refining
pass, then the diffusion video decoder drawing from the refining pass's generator. Parity on the
tiny LTX-2.5 folder against diffusers' classes chained the same way: `LTX2Pipeline` (latents out)
-> `LTX2LatentUpsamplePipeline` -> `LTX2Pipeline` on the refining sigmas (latents out) ->
`LTX2VideoDiffusionDecodePipeline` with that pass's generator; the soundtrack is the refining
pass's own. Tolerances as LTX-2.0's two-stage path (`test_ltx2_upscale.py`).

Left to the model, it renders ComfyUI's official 2.5 template's recipe (`versions.py`): the first
pass on the distilled sigmas, the refining pass on 0.85, 0.725, 0.4219, both unguided with
euler_ancestral (diffusers stepping `euler_ancestral_reference.py`); params given override it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from euler_ancestral_reference import euler_ancestral
from ltx2_harness import (
    Pixels,
    first_frame_image,
    ltx2_rig,
    max_diff,
    pipeline_decodes,
    render,
    take_audio,
    take_frames,
    uint8_frames,
)
from test_ltx2_upscale import AUDIO_TOLERANCE, RENDER, TOLERANCE, chained

from inline_core.diffusion.libs import module
from inline_core.families.ltx2.descriptor import UPSCALE_CATEGORY
from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.kit_ltx25 import FOLDER, UPSAMPLER
from inline_core.families.ltx2.manual_sigmas import parse_sigmas
from inline_core.families.ltx2.request import REFINE_SIGMAS
from inline_core.families.ltx2.versions import DISTILLED_SIGMAS, LTX25, VERSIONS, sigmas_text
from inline_core.sampling.loop import StepLoopSampler

TEMPLATE = VERSIONS[LTX25]
# The 2.5 template's recipe, as diffusers' chain takes it.
TEMPLATE_CHAIN: dict[str, Any] = {
    "first": {
        "sigmas": list(parse_sigmas(DISTILLED_SIGMAS, "test")),
        "guidance_scale": 1.0,
        "audio_guidance_scale": 1.0,
    },
    "refine_sigmas": TEMPLATE.refine_sigmas,
    "scheduler_for": lambda config: euler_ancestral(config, RENDER["seed"]),  # pyright: ignore[reportUnknownLambdaType]
}
# 3 frames, not LTX-2.0's 5: diffusers' diffusion decoder runs uncompiled flex attention, whose
# score matrix grows as the square of the frames (the reference's decode was 9/10 of a case).
FRAMES = 3
# Every one of it given otherwise: LTX-2.0's recipe at RENDER's steps and guidance.
GIVEN: dict[str, Any] = {
    "sampler": "euler",
    "refine_sampler": "euler",
    "refine_sigmas": sigmas_text(REFINE_SIGMAS),
    "audio_guidance": RENDER["guidance"],
}


@pytest.fixture(scope="module")
def ltx25_upsampler(ltx25_kit: LTX2Kit) -> Any:
    """The kit's latent upsampler, in `latent_upscale_models/` as ComfyUI's 2.5 templates put it."""
    ltx2: Any = module("diffusers.pipelines.ltx2.latent_upsampler")
    folder = ltx25_kit.root / UPSCALE_CATEGORY / UPSAMPLER
    return ltx2.LTX2LatentUpsamplerModel.from_pretrained(str(folder), local_files_only=True).eval()


def diffusers_ltx25_chain(
    pipes: tuple[Any, Any], upsampler: Any, image: Any, recipe: dict[str, Any]
) -> tuple[Pixels, np.ndarray[Any, Any], Pixels]:
    """diffusers' frames through the diffusion decoder, the refining pass's soundtrack, and the
    frames its convolutional VAE would decode: one chain, its latents out, then diffusers'
    own decodes as `LTX2Pipeline` makes them (the kit's VAE takes no decode timestep)."""
    pipe, decode = pipes
    generator = torch.Generator("cpu").manual_seed(RENDER["seed"])
    latents, audio = chained(
        pipe, upsampler, None, image, generator, "latent", num_frames=FRAMES, **recipe
    )
    video = decode(latents, generator=generator, output_type="np", denormalize=False)
    vae_frames, sound = pipeline_decodes(pipe, latents, audio)
    return uint8_frames(video.frames[0]), sound.samples, vae_frames


# Two cases cover both axes (text and image; the template's recipe and params given), each a
# whole two-stage chain on both sides: the slowest LTX-2 tests, so not all four pairs.
@pytest.mark.parametrize(
    ("from_image", "given"), [(False, False), (True, True)], ids=["text-template", "image-given"]
)
def test_ltx25_two_stage_render_equals_diffusers_chained_classes(
    ltx25_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx25_reference: tuple[Any, Any],
    ltx25_upsampler: Any,
    tmp_path: Path,
    from_image: bool,
    given: bool,
) -> None:
    """Left to the model: the 2.5 template's recipe; given: the params' own."""
    image = first_frame_image(48, 40, seed=5) if from_image else None
    rig = ltx2_rig(ltx25_kit.root, ltx2_sampler)
    params: dict[str, Any] = {k: v for k, v in RENDER.items() if k != "prompt"}
    params["frames"] = FRAMES
    if given:
        params.update(GIVEN)
    else:  # the sampling left to the model (the harness's steps cleared too)
        del params["guidance"]
        params["steps"] = None
    if image is not None:
        params["image"] = image
    result = render(rig, tmp_path, model=FOLDER, upscale=True, **params)
    frames, sound = take_frames(result), take_audio(result)
    recipe = {} if given else TEMPLATE_CHAIN
    want, want_sound, vae_frames = diffusers_ltx25_chain(
        ltx25_reference, ltx25_upsampler, image, recipe
    )
    assert frames.shape == want.shape == (FRAMES, 64, 64, 3)
    assert max_diff(frames, vae_frames) > 10  # the diffusion decoder decoded it, not the VAE
    assert max_diff(frames, want) <= TOLERANCE
    assert frames.std() > 1.0
    reference_16 = np.round(np.clip(want_sound, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE
    took = result.takes[0].params
    assert took["upscale"] is True
    if not given:  # the take says what ran
        assert (took["sampler"], took["refine_sampler"]) == ("euler_ancestral", "euler_ancestral")
        assert took["refine_sigmas"] == "0.85, 0.725, 0.4219, 0"
        assert (took["steps"], took["guidance"], took["audio_guidance"]) == (8, 1.0, 1.0)
