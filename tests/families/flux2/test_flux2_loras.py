"""LoRA parity: a FLUX.2 klein render with a LoRA stack equals diffusers' Flux2KleinPipeline after
`load_lora_weights` + `set_adapters` with the same files, in diffusers' naming and BFL's; and two
requests with different stacks batched together each render their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flux2_harness import (
    dev_kwargs,
    make_rig,
    max_diff,
    pixels,
    reference_kwargs,
    render,
    take_pixels,
)

from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import Stack, picks, reference_with

TOLERANCE = 1
MODEL = "flux2_klein_tiny.safetensors"

STACKS = [
    pytest.param([("a", 1.0)], id="attention"),
    pytest.param([("a", 0.7), ("b", 1.2)], id="two-at-different-strengths"),
    pytest.param([("b-bfl", 1.0)], id="bfl-naming"),
]


@pytest.mark.parametrize("stack", STACKS)
def test_lora_render_matches_klein(
    flux2_kit: Flux2Kit, sampler: StepLoopSampler, klein_pipe: Any, tmp_path: Path, stack: Stack
) -> None:
    rig = make_rig(flux2_kit.root, sampler)
    loras = picks(rig, flux2_kit, stack)
    ours = take_pixels(render(rig, tmp_path, "a lighthouse", loras=loras, model=MODEL))
    with reference_with(klein_pipe, flux2_kit, stack) as pipe:
        ref = pipe(prompt="a lighthouse", **reference_kwargs(4, 1.0)).images[0]
    plain = take_pixels(render(rig, tmp_path, "a lighthouse", model=MODEL))
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, plain) > 10 * TOLERANCE  # the LoRA changed the picture


def test_lora_render_matches_flux2_pipeline_on_dev(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, dev_pipe: Any, tmp_path: Path
) -> None:
    """dev reads LoRAs in the namings klein does, equal to `Flux2Pipeline`'s."""
    rig = make_rig(flux2_dev_kit.root, sampler)
    stack = [("a", 0.7), ("b-bfl", 1.2)]
    loras = picks(rig, flux2_dev_kit, stack)
    model = "flux2_dev_tiny.safetensors"
    ours = take_pixels(render(rig, tmp_path, "a lighthouse", loras=loras, model=model, steps=2))
    with reference_with(dev_pipe, flux2_dev_kit, stack) as pipe:
        ref = pipe(prompt="a lighthouse", **dev_kwargs(2, 4.0)).images[0]
    plain = take_pixels(render(rig, tmp_path, "a lighthouse", model=model, steps=2))
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, plain) > 10 * TOLERANCE


def test_a_turbo_lora_on_every_layer_in_bfl_naming_renders_as_comfyui_reads_it(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, dev_pipe: Any, tmp_path: Path
) -> None:
    """The templates' Turbo LoRA in BFL's naming (fused q/k/v, the embedders, the modulations,
    the output layer) renders what its twin in diffusers' naming renders, in our server and in
    `Flux2Pipeline`: the output modulation's halves are read in BFL's order, as ComfyUI applies
    them (diffusers' converter leaves them unswapped)."""
    rig = make_rig(flux2_dev_kit.root, sampler)
    model = "flux2_dev_tiny.safetensors"
    bfl = take_pixels(
        render(rig, tmp_path, "a lighthouse", loras=picks(rig, flux2_dev_kit, [("turbo", 1.0)]),
               model=model, steps=2)
    )  # fmt: skip
    twin = [("turbo-diffusers", 1.0)]
    split = take_pixels(
        render(rig, tmp_path, "a lighthouse", loras=picks(rig, flux2_dev_kit, twin), model=model,
               steps=2)
    )  # fmt: skip
    with reference_with(dev_pipe, flux2_dev_kit, twin) as pipe:
        ref = pipe(prompt="a lighthouse", **dev_kwargs(2, 4.0)).images[0]
    plain = take_pixels(render(rig, tmp_path, "a lighthouse", model=model, steps=2))
    assert max_diff(bfl, split) <= TOLERANCE
    assert max_diff(bfl, pixels(ref)) <= TOLERANCE
    assert max_diff(bfl, plain) > 10 * TOLERANCE
    assert bfl.std() > 1.0
