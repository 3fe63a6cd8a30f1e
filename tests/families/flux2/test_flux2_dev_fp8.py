"""FLUX.2 dev's real ComfyUI file layouts, written tiny from the kit's files: Comfy-Org's
`flux2_dev_fp8mixed.safetensors` (fp8 layers with ComfyUI's per-layer `weight_scale`,
`input_scale` and `comfy_quant`; some layers around the blocks kept in bf16, unscaled) and the
fp8 Mistral (`mistral_3_small_flux2_fp8.safetensors`, in the same per-layer layout or the older
`scale_weight` / `scaled_fp8` one, its tokenizer inside). Both are told as dev and its Mistral,
load through the shared fp8 loading with their layers kept in fp8, and render what the very
numbers they hold, upcast by hand, render."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from flux2_harness import make_rig, max_diff, render, take_pixels

from inline_core.diffusion.layer_cast import ScaledCastLinear
from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.sampling.loop import StepLoopSampler
from tests.diffusion.fp8_files import write_fp8

DEV = "flux2_dev_fp8mixed.safetensors"
MISTRAL = "mistral_3_small_flux2_fp8.safetensors"
UPCAST = "flux2_dev_upcast.safetensors"
TOLERANCE = 1  # the same numbers: a level at most where oneDNN sums in another order
FP8 = torch.float8_e4m3fn
# What a mixed file keeps wide: the input, time and guidance embedders, the output layer.
WIDE = ("img_in", "txt_in", "time_in.in_layer", "guidance_in.out_layer", "final_layer.linear")


def keep_wide(fp8: Path, upcast: Path) -> None:
    """The `WIDE` layers of the fp8 file back in bf16 without scales, and the reference's as
    those bf16 numbers upcast."""
    stored, reference = load_safetensors(fp8), load_safetensors(upcast)
    for layer in WIDE:
        wide = reference[f"{layer}.weight"].to(torch.bfloat16)
        stored[f"{layer}.weight"] = wide
        reference[f"{layer}.weight"] = wide.to(torch.float32)
        for key in ("weight_scale", "input_scale", "comfy_quant"):
            del stored[f"{layer}.{key}"]
    save_safetensors(stored, fp8)
    save_safetensors(reference, upcast)


def write_folders(kit: Flux2DevKit, root: Path, *, mixed_encoder: bool) -> tuple[Path, Path]:
    """(a models folder of the fp8 files, one of the numbers they hold upcast to float32)."""
    assert kit.diffusion_file is not None and kit.text_encoder_file is not None
    fp8, upcast = root / "fp8", root / "upcast"
    for folder in (fp8, upcast):
        shutil.copytree(kit.root / "vae", folder / "vae")
    write_fp8(
        kit.diffusion_file,
        fp8 / "diffusion_models" / DEV,
        upcast / "diffusion_models" / UPCAST,
        scaled=True,
        dtype=FP8,
        mixed=True,
    )
    keep_wide(fp8 / "diffusion_models" / DEV, upcast / "diffusion_models" / UPCAST)
    write_fp8(
        kit.text_encoder_file,
        fp8 / "text_encoders" / MISTRAL,
        upcast / "text_encoders" / "mistral_3_small_flux2_upcast.safetensors",
        scaled=True,
        dtype=FP8,
        mixed=mixed_encoder,
    )
    return fp8, upcast


@pytest.mark.parametrize("mixed_encoder", [True, False], ids=["mistral-mixed", "mistral-scaled"])
def test_fp8mixed_dev_and_fp8_mistral_render_their_upcast_numbers(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, tmp_path: Path, mixed_encoder: bool
) -> None:
    fp8, upcast = write_folders(flux2_dev_kit, tmp_path, mixed_encoder=mixed_encoder)
    written = load_safetensors(fp8 / "diffusion_models" / DEV)
    assert written["double_blocks.0.img_attn.qkv.weight"].dtype == FP8
    assert written["double_blocks.0.img_attn.qkv.comfy_quant"].dtype == torch.uint8
    assert written["img_in.weight"].dtype == torch.bfloat16 and "img_in.weight_scale" not in written
    encoder = load_safetensors(fp8 / "text_encoders" / MISTRAL)
    assert encoder["model.layers.0.self_attn.q_proj.weight"].dtype == FP8

    rig = make_rig(fp8, sampler)
    found = rig.family.files.found(DEV)
    assert not found.missing
    assert {p.path.name for p in (found.parts["text_encoder"], found.parts["tokenizer"]) if p} == {
        MISTRAL
    }
    pipeline: Any = rig.pipeline(DEV)
    assert pipeline.variant.klein is False  # dev, told from the fp8 file's shapes
    q = pipeline.transformer.transformer_blocks[0].attn.to_q
    assert isinstance(q, ScaledCastLinear) and q.weight.dtype == FP8  # kept in fp8
    language = pipeline.text_encoder.model
    layer = next(m for m in language.modules() if isinstance(m, ScaledCastLinear))
    assert layer.weight.dtype == FP8

    ours = take_pixels(render(rig, tmp_path, "a lighthouse at dusk", model=DEV, steps=3))
    by_hand = make_rig(upcast, sampler)
    want = take_pixels(render(by_hand, tmp_path, "a lighthouse at dusk", model=UPCAST, steps=3))
    assert max_diff(ours, want) <= TOLERANCE
    assert ours.std() > 1.0
