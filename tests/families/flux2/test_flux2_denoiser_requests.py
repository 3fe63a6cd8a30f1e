"""The FLUX.2 denoiser alone (the stack the `sample` primitive and a worker group's ranks
drive) guides as the variant it was built for, whichever path built its request: given only the
sampling settings and the encoded prompts, as `families/nodes/ops.py` asks for one, a klein base
model at guidance 4 runs the negative (as the `bfl/flux-2` node and diffusers'
Flux2KleinPipeline do), dev embeds its guidance, a distilled klein runs unguided."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import torch
from flux2_harness import (
    Pixels,
    make_rig,
    max_diff,
    pixels,
    reference_kwargs,
    render,
    take_pixels,
)
from PIL import Image

from inline_core.diffusion.libs import diffusers
from inline_core.engine.target import denoiser_target
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.families.standalone import FamilyRig
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler

BASE, DISTILLED = "flux2_klein_base_tiny.safetensors", "flux2_klein_tiny.safetensors"
DEV = "flux2_dev_tiny.safetensors"
TOLERANCE = 1  # float ordering may move a channel by a level; never more
STEPS, GUIDANCE = 3, 4.0


def denoised(rig: FamilyRig, model: str, prompt: str, guidance: float) -> Pixels:
    """One render through the model's denoiser, its request built as `sample` builds one: the
    settings and the encoded prompts, nothing of the variant (the empty prompt as negative)."""
    runtime, family = rig.runtime, rig.family
    sources = rig.sources(model)
    target = denoiser_target(runtime, family, sources.require("transformer"), None)
    stacks = runtime.stacks()
    encoder = stacks.text_encoder(
        family, sources.require("text_encoder"), sources.require("tokenizer")
    )
    state = target.pipeline.request(
        prompt="",
        width=64,
        height=64,
        steps=STEPS,
        guidance=guidance,
        seed=7,
        positive=encoder.encode(prompt),
        negative=encoder.encode(""),
    )
    latents = target.sampler.run(SampleJob(pipeline=target.pipeline, state=state))
    vae: Any = stacks.vae(family, sources.require("vae"))
    with torch.inference_mode():
        return pixels(cast(Image.Image, vae.decode(latents)))


@pytest.fixture
def klein(flux2_kit: Flux2Kit, sampler: StepLoopSampler) -> FamilyRig:
    return make_rig(flux2_kit.root, sampler)


# 4: the model's own; 12: far from unguided (the tiny model's prompts differ little).
@pytest.mark.parametrize("guidance", [GUIDANCE, 12.0])
def test_klein_base_denoiser_guides_as_the_node_and_diffusers(
    klein: FamilyRig, klein_pipe: Any, tmp_path: Path, guidance: float
) -> None:
    ours = denoised(klein, BASE, "a cat", guidance)
    node = render(klein, tmp_path, "a cat", model=BASE, steps=STEPS, guidance=guidance)
    assert max_diff(ours, take_pixels(node)) <= TOLERANCE
    base: Any = diffusers().Flux2KleinPipeline(**klein_pipe.components, is_distilled=False)
    base.set_progress_bar_config(disable=True)
    ref = base(prompt="a cat", **reference_kwargs(STEPS, guidance)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, denoised(klein, BASE, "a cat", 1.0)) > TOLERANCE  # it guided


def test_distilled_klein_denoiser_runs_unguided_as_the_node(
    klein: FamilyRig, tmp_path: Path
) -> None:
    ours = denoised(klein, DISTILLED, "a cat", GUIDANCE)
    node = render(klein, tmp_path, "a cat", model=DISTILLED, steps=STEPS, guidance=GUIDANCE)
    assert max_diff(ours, take_pixels(node)) <= TOLERANCE
    assert max_diff(ours, denoised(klein, DISTILLED, "a cat", 1.0)) <= TOLERANCE


def test_dev_denoiser_embeds_its_guidance_as_the_node(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = make_rig(flux2_dev_kit.root, sampler)
    ours = denoised(rig, DEV, "a cat", GUIDANCE)
    node = render(rig, tmp_path, "a cat", model=DEV, steps=STEPS, guidance=GUIDANCE)
    assert max_diff(ours, take_pixels(node)) <= TOLERANCE
    assert max_diff(ours, denoised(rig, DEV, "a cat", 1.5)) > TOLERANCE  # into the model


@pytest.mark.parametrize("model", [BASE, DEV])
def test_a_worker_groups_request_carries_the_variant(
    flux2_kit: Flux2Kit, flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, model: str
) -> None:
    """The server builds a worker group's request with the family (torch-free), from the same
    settings: it guides as the file's variant does."""
    root = flux2_kit.root if model == BASE else flux2_dev_kit.root
    rig = make_rig(root, sampler)
    sources = rig.sources(model)
    state = rig.family.new_request(
        "denoiser", sources, "key", prompt="", width=64, height=64, steps=2, guidance=4.0, seed=1
    )
    expected = (True, False) if model == BASE else (False, True)
    assert (state.cfg, state.embedded_guidance) == expected
