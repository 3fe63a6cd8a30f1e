"""Pixel parity for FLUX.2 dev: a take rendered through the runner and the batched sampler
equals what diffusers' own Flux2Pipeline renders on the CPU (guidance embedded, one forward a
step, the Mistral read through BFL's system message), from a prompt alone and with reference
images, in both layouts (ComfyUI's: BFL's transformer naming, the Mistral pruned to 30 layers
with its tokenizer inside)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flux2_harness import dev_kwargs, make_rig, max_diff, picture, pixels, render, take_pixels

from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 1  # float ordering may move a channel by a level; never more
LAYOUTS = {"comfy": "flux2_dev_tiny.safetensors", "diffusers": "flux2_dev_tiny_diffusers"}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_text_to_image_matches_flux2_pipeline(
    flux2_dev_kit: Flux2DevKit,
    sampler: StepLoopSampler,
    dev_pipe: Any,
    tmp_path: Path,
    layout: str,
) -> None:
    rig = make_rig(flux2_dev_kit.root, sampler)
    prompt = "a lighthouse at dusk"
    ours = take_pixels(render(rig, tmp_path, prompt, model=LAYOUTS[layout], steps=3))
    ref = dev_pipe(prompt=prompt, **dev_kwargs(3, 4.0)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert ours.std() > 1.0  # a picture of noise, not a flat fill


def test_guidance_is_embedded_and_changes_the_picture(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, dev_pipe: Any, tmp_path: Path
) -> None:
    """Another guidance is another input of the model (no second forward), as diffusers runs
    it."""
    rig = make_rig(flux2_dev_kit.root, sampler)
    model = LAYOUTS["diffusers"]
    ours = take_pixels(render(rig, tmp_path, "a cat", model=model, steps=2, guidance=1.5))
    ref = dev_pipe(prompt="a cat", **dev_kwargs(2, 1.5)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    other = take_pixels(render(rig, tmp_path, "a cat", model=model, steps=2, guidance=6.0))
    assert max_diff(ours, other) > 0


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reference_images_match_flux2_pipeline(
    flux2_dev_kit: Flux2DevKit,
    sampler: StepLoopSampler,
    dev_pipe: Any,
    tmp_path: Path,
    layout: str,
) -> None:
    rig = make_rig(flux2_dev_kit.root, sampler)
    first, second = picture(96, 64, 1), picture(64, 64, 2)
    refs = {"image": first, "image2": second}
    ours = take_pixels(
        render(rig, tmp_path, "make it blue", references=refs, model=LAYOUTS[layout], steps=2)
    )
    ref = dev_pipe(prompt="make it blue", image=[first, second], **dev_kwargs(2, 4.0)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    alone = take_pixels(render(rig, tmp_path, "make it blue", model=LAYOUTS[layout], steps=2))
    assert max_diff(ours, alone) > 0  # the references change the picture
