"""A kit checkpoint with its UNet in fp8, as ComfyUI's SDXL fp8 files store it.

`<name>_fp8_e4m3fn.safetensors`: every floating tensor under `model.diffusion_model.` in
`float8_e4m3fn` (ComfyUI's `--fp8_e4m3fn-unet` checkpoints), the text encoders and the VAE as
the kit wrote them. `<name>_fp8_scaled.safetensors`: the UNet's linear layer weights divided by
a per-tensor scale first and stored with ComfyUI's `scale_weight`, `scale_input` and
`scaled_fp8` keys (`diffusion/files/scales.py`), the rest of the UNet as written.
"""

from __future__ import annotations

from pathlib import Path

import torch

from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.families.sdxl import unet

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest float8_e4m3fn
SCALE_MARKER = "scaled_fp8"


def fp8_unet_state(
    state: dict[str, torch.Tensor], *, scaled: bool = False
) -> dict[str, torch.Tensor]:
    """`state` (an all-in-one checkpoint's) with its UNet stored in fp8."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if not key.startswith(unet.PREFIX) or not value.is_floating_point():
            out[key] = value
        elif not scaled:
            out[key] = value.to(FP8)
        elif key.endswith(".weight") and value.ndim == 2:  # a linear layer's
            stem = key.removesuffix(".weight")
            scale = (value.abs().max().to(torch.float32) / FP8_MAX).clamp(min=1e-12)
            out[key] = (value.to(torch.float32) / scale).to(FP8)
            out[f"{stem}.scale_weight"] = scale.reshape(())
            out[f"{stem}.scale_input"] = torch.ones((), dtype=torch.float32)
        else:
            out[key] = value
    if scaled:
        out[SCALE_MARKER] = torch.empty(0, dtype=FP8)
    return out


def write_fp8_checkpoints(checkpoint: Path) -> tuple[Path, Path]:
    """The plain and the scaled fp8 copies of `checkpoint`, beside it."""
    state = load_safetensors(checkpoint)
    stem = checkpoint.name.removesuffix(".safetensors")
    plain = checkpoint.with_name(f"{stem}_fp8_e4m3fn.safetensors")
    scaled = checkpoint.with_name(f"{stem}_fp8_scaled.safetensors")
    save_safetensors(fp8_unet_state(state), plain)
    save_safetensors(fp8_unet_state(state, scaled=True), scaled)
    return plain, scaled
