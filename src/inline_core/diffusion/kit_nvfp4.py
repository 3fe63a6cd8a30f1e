"""ComfyUI's NVFP4 layers written offline, for the kits' tiny `_fp4_mixed` files.

The quantizer is written from ComfyUI's formulas (comfy-kitchen's eager `quantize_nvfp4`, with
ComfyUI's `to_blocked` for the scales), not checked against a real file (no model hub here):
- the per-tensor scale `weight_scale_2` is max|w| / (448 x 6);
- each block of 16 numbers of a row gets the float8_e4m3fn scale max|block| / 6 / that scale
  (at most 448), stored in cuBLAS's blocked layout;
- each number is w / (`weight_scale_2` x its block's scale), clamped to +-6 and rounded to the
  nearest e2m1 value (ties to the even code), two codes a byte, the first in the high nibble.
Only weights whose sides are multiples of 16: ComfyUI would pad the others, which the file does
not record (`diffusion/files/nvfp4.py`).
"""

from __future__ import annotations

import json

import torch

from inline_core.diffusion.files.nvfp4 import BLOCK, TILE_COLUMNS, TILE_ROWS, block_scale_shape

E2M1_MAX, E4M3_MAX = 6.0, 448.0
MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # e2m1 codes 0..7; 8..15 their negatives


def marker(name: str) -> torch.Tensor:
    """ComfyUI's per-layer `comfy_quant`: the JSON bytes naming the layer's format."""
    return torch.tensor(list(json.dumps({"format": name}).encode()), dtype=torch.uint8)


def e2m1_codes(values: torch.Tensor) -> torch.Tensor:
    """The nearest e2m1 code of each value (|value| <= 6), ties to the even code."""
    table = torch.tensor(MAGNITUDES, dtype=torch.float32)
    distance = (values.abs().unsqueeze(-1) - table).abs()
    nearest = distance == distance.min(dim=-1, keepdim=True).values
    even = (torch.arange(len(MAGNITUDES)) % 2 == 0).to(torch.int64)
    code = (nearest.to(torch.int64) * (2 + even)).argmax(dim=-1)  # an even nearest first
    return code + 8 * (values < 0).to(torch.int64)


def to_blocked(scales: torch.Tensor) -> torch.Tensor:
    """[rows, columns] scales in cuBLAS's blocked layout, padded with zeros (ComfyUI's
    `to_blocked`, flatten=False)."""
    rows, columns = scales.shape
    padded_rows, padded_columns = block_scale_shape(rows, columns * BLOCK)
    raw = torch.zeros(padded_rows, padded_columns, dtype=torch.uint8)
    raw[:rows, :columns] = scales.view(torch.uint8)
    tiles = raw.view(padded_rows // TILE_ROWS, TILE_ROWS, -1, TILE_COLUMNS).permute(0, 2, 1, 3)
    blocked = tiles.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(padded_rows, padded_columns)
    return blocked.contiguous().view(torch.float8_e4m3fn)


def quantize_nvfp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(packed codes, blocked block scales, per-tensor scale) of a weight whose sides are
    multiples of 16."""
    w = weight.detach().to(torch.float32)
    rows, columns = w.shape
    tensor_scale = w.abs().amax() / (E4M3_MAX * E2M1_MAX)
    blocks = w.reshape(rows, columns // BLOCK, BLOCK)
    wanted = (blocks.abs().amax(dim=-1) / E2M1_MAX / tensor_scale).clamp(max=E4M3_MAX)
    block_scales = wanted.to(torch.float8_e4m3fn)
    total = tensor_scale * block_scales.to(torch.float32)
    safe = torch.where(total == 0, torch.ones_like(total), total)
    scaled = torch.where(total.unsqueeze(-1) == 0, 0.0, blocks / safe.unsqueeze(-1))
    codes = e2m1_codes(scaled.clamp(-E2M1_MAX, E2M1_MAX).reshape(rows, columns))
    pairs = codes.reshape(rows, columns // 2, 2)
    packed = (pairs[..., 0] * 16 + pairs[..., 1]).to(torch.uint8)
    return packed, to_blocked(block_scales), tensor_scale.reshape(())
