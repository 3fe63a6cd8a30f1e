"""SDXL checkpoints with an fp8 UNet (ComfyUI's `*_fp8_e4m3fn` and `*_fp8_scaled` files, the
kit's `kit_fp8.py`): the UNet's layers stay stored in fp8 and cast as they run, and the render
equals the one from the same numbers upcast to float32 by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from sdxl_harness import max_diff, render, sdxl_rig, take_pixels

from inline_core.diffusion.layer_cast import CastLinear, ScaledCastLinear
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 1  # levels of 255: the same float32 arithmetic on the same numbers
FP8 = torch.float8_e4m3fn


def upcast_by_hand(fp8: Path, target: Path) -> None:
    """`fp8`'s numbers in float32 (each scaled weight times its scale), its scale keys cut."""
    state = load_safetensors(fp8)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key == "scaled_fp8" or key.endswith((".scale_weight", ".scale_input")):
            continue
        if value.dtype == FP8:
            scale = state.get(key.removesuffix(".weight") + ".scale_weight")
            value = value.to(torch.float32) * (1.0 if scale is None else scale)
        out[key] = value
    save_safetensors(out, target)


@pytest.mark.parametrize("scaled", [False, True], ids=["fp8_e4m3fn", "fp8_scaled"])
def test_an_fp8_checkpoint_renders_its_numbers_upcast_by_hand(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path, scaled: bool
) -> None:
    fp8 = sdxl_kit.fp8[1 if scaled else 0]
    assert fp8.name.endswith("_fp8_scaled.safetensors" if scaled else "_fp8_e4m3fn.safetensors")
    models = tmp_path / "models"  # the kit's models and the by-hand file beside them
    shutil.copytree(sdxl_kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    by_hand = models / "checkpoints" / "by_hand.safetensors"
    upcast_by_hand(fp8, by_hand)
    rig = sdxl_rig(models, sdxl_sampler)
    ours = take_pixels(render(rig, tmp_path, model=fp8.name, sampler="dpmpp_2m"))
    hand = take_pixels(render(rig, tmp_path, model=by_hand.name, sampler="dpmpp_2m"))
    assert max_diff(ours, hand) <= TOLERANCE
    full = take_pixels(render(rig, tmp_path, model=sdxl_kit.checkpoint_name, sampler="dpmpp_2m"))
    assert max_diff(ours, full) > TOLERANCE  # fp8 rounded the weights: it is not the float32 file
    # The UNet's linear layers stay stored in fp8, cast as they run (scaled: times their scale).
    unet = rig.pipeline(fp8.name).unet
    linears = [m for m in unet.modules() if isinstance(m, CastLinear)]
    assert linears and all(m.weight.dtype == FP8 for m in linears)
    assert all(isinstance(m, ScaledCastLinear) == scaled for m in linears)
