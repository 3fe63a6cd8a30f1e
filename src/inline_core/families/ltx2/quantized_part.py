"""A part of ComfyUI's all-in-one LTX-2 file whose layers are quantized as ComfyUI writes them
(int8 with or without its convrot rotation, NVFP4, fp8 with per-tensor scales; marked one by one
or listed in the header), read as the shared loader reads any single file's
(`diffusion/comfy_layers.py`, `diffusion/fp8_scales.py`): each layer dequantized into the dtype
the part is read in, its scales and markers gone, a format not read here refused naming it
(torch)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from inline_core.diffusion.comfy_layers import dequantize_comfy_layers
from inline_core.diffusion.comfy_quant import with_file_markers
from inline_core.diffusion.fp8_scales import dequantize, split_scales


def dequantized_part(
    raw: Mapping[str, torch.Tensor], names: Mapping[str, str], path: Path, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """The part's tensors (`raw`, by the file's keys) under diffusers' names (`names`), in
    `dtype`: quantized layers dequantized, scale and marker keys dropped."""
    weights, scales = split_scales(dequantize_comfy_layers(with_file_markers(raw, path), dtype))
    return {
        names[key]: dequantize(value, scales[key], dtype) if key in scales else value.to(dtype)
        for key, value in weights.items()
        if key in names
    }
