"""NVFP4 layers dequantized at load, in the compute dtype (torch): what ComfyUI does with them
on a GPU without fp4 matrix multiplies (comfy-kitchen's eager `dequantize_nvfp4`).

The keys and shapes are `files/nvfp4.py`'s; as there, the arithmetic follows ComfyUI's code, not
a real file. Each code is looked up in e2m1's table, each block of 16 is multiplied by
`weight_scale_2 * weight_scale` (its block's, unswizzled from cuBLAS's blocked layout), all in
the compute dtype, as comfy-kitchen computes it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from inline_core.diffusion.comfy_quant import read_marker
from inline_core.diffusion.files import nvfp4 as layout
from inline_core.diffusion.files.header import TensorInfo
from inline_core.diffusion.files.scales import INPUT_SCALES, NVFP4_TENSOR_SCALE
from inline_core.errors import RunFailed

# e2m1's 16 codes: sign bit, two exponent bits, one mantissa bit.
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
MARKER = ".comfy_quant"


def from_blocked(blocked: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """The [rows, columns] block scales out of cuBLAS's blocked layout: tiles of 128 rows by 4
    columns, row-major over tiles; in a tile, row r and column c at (r % 32) * 16 + (r // 32)
    * 4 + c (ComfyUI's `to_blocked`, reversed)."""
    row_tiles = -(-rows // layout.TILE_ROWS)
    column_tiles = -(-columns // layout.TILE_COLUMNS)
    tiles = blocked.reshape(row_tiles, column_tiles, 32, 4, 4).transpose(2, 3)
    grid = tiles.reshape(row_tiles, column_tiles, layout.TILE_ROWS, layout.TILE_COLUMNS)
    padded = grid.permute(0, 2, 1, 3).reshape(row_tiles * layout.TILE_ROWS, -1)
    return padded[:rows, :columns]


def dequantize(
    packed: torch.Tensor, block_scales: torch.Tensor, tensor_scale: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """One NVFP4 weight as `dtype` numbers."""
    table = torch.tensor(E2M1, dtype=dtype, device=packed.device)
    codes = torch.stack((packed >> 4, packed & 0x0F), dim=-1).reshape(packed.shape[0], -1)
    values = table[codes.long()]
    rows, columns = values.shape
    blocks = from_blocked(block_scales.view(torch.float8_e4m3fn), rows, columns // layout.BLOCK)
    # As comfy-kitchen: the per-tensor scale as float32, both scales then in `dtype`.
    second = tensor_scale.reshape(()).to(torch.float32).to(dtype)
    total = second * blocks.to(dtype)
    return (values.reshape(rows, -1, layout.BLOCK) * total.unsqueeze(-1)).reshape(rows, columns)


def dequantize_layers(
    raw: Mapping[str, torch.Tensor], dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """`raw` with each NVFP4 layer's weight dequantized to `dtype` and its scales and marker
    gone; a layer whose tensors are not ComfyUI's NVFP4 layout, or whose marker names another
    format, raises `RunFailed` naming it."""
    header = {k: TensorInfo(_dtype_name(v), tuple(v.shape)) for k, v in raw.items()}
    weights = layout.packed_weights(header)
    stray = layout.stray_scales(header)
    if stray:
        raise RunFailed(f"{stray[0]} is an NVFP4 scale, but its layer's weight is not packed fp4")
    out = dict(raw)
    for weight, layer in weights.items():
        problem = layout.problem(header, weight, layer)
        if problem is not None:
            raise RunFailed(problem)
        marker = out.pop(layer + MARKER, None)
        if marker is not None:
            _check_marker(marker, layer)
        out[weight] = dequantize(
            out[weight],
            out.pop(layer + layout.BLOCK_SCALE),
            out.pop(layer + NVFP4_TENSOR_SCALE),
            dtype,
        )
        for suffix in INPUT_SCALES:
            out.pop(layer + suffix, None)
    return out


def _check_marker(marker: torch.Tensor, layer: str) -> None:
    name = read_marker(marker, layer).format
    if name != layout.FORMAT:
        raise RunFailed(
            f"{layer} is stored as NVFP4 but its {MARKER} names format {name!r}, not "
            f"{layout.FORMAT!r}"
        )


def _dtype_name(tensor: torch.Tensor) -> str:
    """safetensors' name for the dtypes NVFP4's layout checks."""
    names = {
        torch.uint8: layout.PACKED,
        torch.float8_e4m3fn: layout.BLOCK_SCALE_DTYPE,
        torch.float32: "F32",
        torch.bfloat16: "BF16",
        torch.float16: "F16",
    }
    return names.get(tensor.dtype, str(tensor.dtype))
