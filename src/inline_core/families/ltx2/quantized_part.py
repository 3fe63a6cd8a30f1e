"""A part of ComfyUI's all-in-one LTX-2 file whose layers are quantized as ComfyUI writes them
(int8 with or without its convrot rotation, NVFP4, fp8 with per-tensor scales; marked one by one
or listed in the header), read as the shared loader reads any single file's
(`diffusion/comfy_layers.py`, `diffusion/fp8_scales.py`): int8 and NVFP4 layers dequantized into
the dtype the loader gives them (`loading.dequantized_dtype`), a scaled fp8 layer multiplied out
in the compute dtype, the rest read in the part's dtype (a part kept in fp8: its fp8 tensors as
stored, the others in the compute dtype, as the shared loader reads them); scale and marker keys
dropped, a format not read here refused naming it (torch)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from inline_core.device.policy import Placement
from inline_core.diffusion.comfy_layers import dequantize_comfy_layers
from inline_core.diffusion.comfy_quant import with_file_markers
from inline_core.diffusion.fp8_scales import FP8, dequantize, split_scales
from inline_core.diffusion.loading import dequantized_dtype, load_dtype
from inline_core.diffusion.placement import torch_dtype


def dequantized_part(
    raw: Mapping[str, torch.Tensor], names: Mapping[str, str], path: Path, placement: Placement
) -> dict[str, torch.Tensor]:
    """The part's tensors (`raw`, by the file's keys) under diffusers' names (`names`)."""
    layers = dequantize_comfy_layers(with_file_markers(raw, path), dequantized_dtype(placement))
    weights, scales = split_scales(layers)
    compute, stored = torch_dtype(placement.dtype), load_dtype(placement)
    out: dict[str, torch.Tensor] = {}
    for key, value in weights.items():
        if key not in names:
            continue
        if key in scales:
            out[names[key]] = dequantize(value, scales[key], compute)
        elif value is not raw.get(key):  # dequantized above: already in its dtype
            out[names[key]] = value
        elif stored in FP8:  # kept in fp8: its fp8 layers stay so, no other number rounds to fp8
            out[names[key]] = value if value.dtype in FP8 else value.to(compute)
        else:
            out[names[key]] = value.to(stored)
    return out
