"""A tiny `gemma_3_12B_it_fp4_mixed` file: the kit's Gemma 3 with some layers in NVFP4, one in
fp8, the rest as written, offline.

The NVFP4 layers are quantized by `diffusion/kit_nvfp4.py` (ComfyUI's formulas, not a real file).
Layers whose sides are not multiples of 16 (the kit's key and value projections) stay as written:
ComfyUI would pad them, which the file does not record (`diffusion/files/nvfp4.py`).
"""

from __future__ import annotations

import torch

from inline_core.diffusion.kit_nvfp4 import E4M3_MAX, marker, quantize_nvfp4

FP4 = ("self_attn.q_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
FP8 = ("self_attn.o_proj",)


def fp4_mixed_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's Gemma file's `state` with its layers' `FP4` projections in NVFP4 and `FP8` in
    fp8 with a per-tensor scale, each marked with its `comfy_quant`."""
    out = dict(state)
    for key, value in state.items():
        stem = key.removesuffix(".weight")
        if not key.startswith("model.layers.") or stem == key:
            continue
        if stem.endswith(FP4):
            packed, blocks, scale = quantize_nvfp4(value)
            out.update(
                {key: packed, f"{stem}.weight_scale": blocks, f"{stem}.weight_scale_2": scale}
            )
            out[f"{stem}.comfy_quant"] = marker("nvfp4")
        elif stem.endswith(FP8):
            scale = value.abs().amax().to(torch.float32) / E4M3_MAX
            out[key] = (value.to(torch.float32) / scale).to(torch.float8_e4m3fn)
            out[f"{stem}.weight_scale"] = scale.reshape(())
            out[f"{stem}.comfy_quant"] = marker("float8_e4m3fn")
    return out
