"""A file's quantized layers in ComfyUI's mixed-precision layouts, dequantized at load (torch):
NVFP4 (`nvfp4.py`) and int8 (`int8.py`); fp8 layers stay stored with their scales
(`fp8_scales.py`), and a layer marked as any other format is refused naming it."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from inline_core.diffusion import int8, nvfp4
from inline_core.diffusion.comfy_quant import refuse_unread


def dequantize_comfy_layers(
    raw: Mapping[str, torch.Tensor], dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """`raw` with its NVFP4 and int8 layers dequantized to `dtype`, their scales and markers
    gone; `RunFailed` naming a layer of a format not read here or not in its layout."""
    refuse_unread(raw)
    return int8.dequantize_layers(nvfp4.dequantize_layers(raw, dtype), dtype)
