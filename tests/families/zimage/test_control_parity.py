"""Control and inpaint parity: a Z-Image render with a control model, a mask, or both equals
diffusers' ZImageControlNetPipeline, ZImageInpaintPipeline and ZImageControlNetInpaintPipeline
on the kit's tiny models, within a few levels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from control_harness import (
    UNION,
    UNION_21,
    UNION_FOLDER,
    control_model,
    edges,
    mask,
    reference,
    source,
)
from lora_harness import picks, reference_with
from zimage_harness import make_runner, max_diff, pixels, reference_kwargs, render, take_pixels

from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 3  # as the plain parity tests: float ordering may move a channel by a level or so
PARAMS: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "guidance": 0.0}
PROMPT = "a lighthouse at dusk"


@pytest.mark.parametrize(
    ("name", "key", "strength"),
    [
        pytest.param(UNION, "union", 0.8, id="union-1.0-file"),
        pytest.param(UNION_FOLDER, "union", 0.5, id="union-1.0-diffusers-folder"),
        pytest.param(UNION_21, "union-2.1", 1.0, id="union-2.1-file-zero-inpaint-channels"),
    ],
)
def test_control_render_matches_diffusers(
    kit: KitPaths,
    sampler: StepLoopSampler,
    reference_pipe: Any,
    tmp_path: Path,
    name: str,
    key: str,
    strength: float,
) -> None:
    runner = make_runner(kit.root, sampler)
    result = render(
        runner,
        tmp_path,
        PROMPT,
        control_image=edges(),
        controlnet=name,
        control_strength=strength,
        **PARAMS,
    )
    ours = take_pixels(result)
    pipe = reference(reference_pipe, "ControlNet", control_model(reference_pipe, kit, key))
    ref = pipe(
        prompt=PROMPT,
        control_image=edges(),
        controlnet_conditioning_scale=strength,
        **reference_kwargs(PARAMS),
    ).images[0]
    plain = reference_pipe(prompt=PROMPT, **reference_kwargs(PARAMS)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, pixels(plain)) > 10 * TOLERANCE  # the control changed the picture
    (take,) = result.takes
    assert take.params["controlnet"] == name and take.params["control_strength"] == strength


def test_control_with_guidance_and_a_lora_matches_diffusers(
    kit: KitPaths, sampler: StepLoopSampler, reference_pipe: Any, tmp_path: Path
) -> None:
    """The negative rows get the control too (diffusers repeats the control image), and a LoRA
    adapts the transformer modules the control model borrows."""
    params: dict[str, Any] = {**PARAMS, "guidance": 3.0, "negative_prompt": "blurry"}
    runner = make_runner(kit.root, sampler)
    loras = picks(runner, kit, [("a", 0.8)])
    ours = take_pixels(
        render(
            runner,
            tmp_path,
            PROMPT,
            loras=loras,
            control_image=edges(),
            controlnet=UNION,
            control_strength=0.7,
            **params,
        )
    )
    pipe = reference(reference_pipe, "ControlNet", control_model(reference_pipe, kit, "union"))
    with reference_with(pipe, kit, [("a", 0.8)]) as adapted:
        ref = adapted(
            prompt=PROMPT,
            control_image=edges(),
            controlnet_conditioning_scale=0.7,
            **reference_kwargs(params),
        ).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE


def test_inpaint_matches_diffusers(
    kit: KitPaths, sampler: StepLoopSampler, reference_pipe: Any, tmp_path: Path
) -> None:
    params: dict[str, Any] = {**PARAMS, "strength": 0.9}
    runner = make_runner(kit.root, sampler)
    result = render(runner, tmp_path, PROMPT, image=source(), mask=mask(), **params)
    ours = take_pixels(result)
    pipe = reference(reference_pipe, "Inpaint")
    kwargs = reference_kwargs(params)
    ref = pipe(prompt=PROMPT, image=source(), mask_image=mask(), strength=0.9, **kwargs)
    img2img = reference(reference_pipe, "Img2Img")
    unmasked = img2img(
        prompt=PROMPT, image=source(), strength=0.9, **reference_kwargs(params)
    ).images[0]
    assert max_diff(ours, pixels(ref.images[0])) <= TOLERANCE
    assert max_diff(ours, pixels(unmasked)) > 10 * TOLERANCE  # the blend kept the outside
    (take,) = result.takes
    assert take.params["inpaint"] == "blend" and take.params["img2img"] is True


def test_control_inpaint_matches_diffusers(
    kit: KitPaths, sampler: StepLoopSampler, reference_pipe: Any, tmp_path: Path
) -> None:
    """A 2.x control model takes the mask and the masked image: the render starts from noise and
    the control carries what to keep, as ZImageControlNetInpaintPipeline does."""
    runner = make_runner(kit.root, sampler)
    result = render(
        runner,
        tmp_path,
        PROMPT,
        image=source(),
        mask=mask(),
        control_image=edges(),
        controlnet=UNION_21,
        control_strength=0.6,
        **PARAMS,
    )
    ours = take_pixels(result)
    model = control_model(reference_pipe, kit, "union-2.1")
    pipe = reference(reference_pipe, "ControlNetInpaint", model)
    ref = pipe(
        prompt=PROMPT,
        image=source(),
        mask_image=mask(),
        control_image=edges(),
        controlnet_conditioning_scale=0.6,
        **reference_kwargs(PARAMS),
    ).images[0]
    control_only = reference(reference_pipe, "ControlNet", model)(
        prompt=PROMPT,
        control_image=edges(),
        controlnet_conditioning_scale=0.6,
        **reference_kwargs(PARAMS),
    ).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, pixels(control_only)) > 10 * TOLERANCE  # the mask and image counted
    (take,) = result.takes
    assert take.params["inpaint"] == "control" and take.params["img2img"] is False
