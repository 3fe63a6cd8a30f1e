"""Pixel parity: a take rendered through the runner and the batched sampler equals what
diffusers' own Flux2KleinPipeline renders for the same inputs on the CPU, in both layouts, from a
prompt alone and with reference images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flux2_harness import make_rig, max_diff, picture, pixels, reference_kwargs, render, take_pixels

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 1  # float ordering may move a channel by a level; never more

LAYOUTS = {"comfy": "flux2_klein_tiny.safetensors", "diffusers": "flux2_klein_tiny_diffusers"}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("size", [(64, 64), (96, 64)], ids=["square", "wide"])
def test_text_to_image_matches_klein(
    flux2_kit: Flux2Kit,
    sampler: StepLoopSampler,
    klein_pipe: Any,
    tmp_path: Path,
    layout: str,
    size: tuple[int, int],
) -> None:
    width, height = size
    rig = make_rig(flux2_kit.root, sampler)
    prompt = "a lighthouse at dusk"
    ours = take_pixels(
        render(rig, tmp_path, prompt, width=width, height=height, model=LAYOUTS[layout])
    )
    ref = klein_pipe(prompt=prompt, **reference_kwargs(4, 1.0, width=width, height=height)).images[
        0
    ]
    assert ours.shape == (height, width, 3)
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert ours.std() > 1.0  # a picture of noise, not a flat fill


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reference_images_match_klein(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, klein_pipe: Any, tmp_path: Path, layout: str
) -> None:
    rig = make_rig(flux2_kit.root, sampler)
    first, second = picture(96, 64, 1), picture(64, 64, 2)
    refs = {"image": first, "image2": second}
    ours = take_pixels(
        render(rig, tmp_path, "make it blue", references=refs, model=LAYOUTS[layout])
    )
    ref = klein_pipe(
        prompt="make it blue", image=[first, second], **reference_kwargs(4, 1.0)
    ).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    alone = take_pixels(render(rig, tmp_path, "make it blue", model=LAYOUTS[layout]))
    assert max_diff(ours, alone) > 0  # the references change the picture


def test_base_model_guides_as_klein_base(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, klein_pipe: Any, tmp_path: Path
) -> None:
    """A base model (told from its file's name) runs classifier-free guidance against the
    empty prompt, as the pipeline does when it is not distilled."""
    from diffusers import Flux2KleinPipeline  # pyright: ignore[reportPrivateImportUsage]

    base: Any = Flux2KleinPipeline(**klein_pipe.components, is_distilled=False)
    base.set_progress_bar_config(disable=True)
    rig = make_rig(flux2_kit.root, sampler)
    params: dict[str, Any] = {"steps": 3, "guidance": 3.0}
    ours = take_pixels(
        render(rig, tmp_path, "a cat", model="flux2_klein_base_tiny.safetensors", **params)
    )
    ref = base(prompt="a cat", **reference_kwargs(3, 3.0)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
