"""NVFP4 numbers decoded by hand, element by element, as ComfyUI's layout states them (the
parity tests' reference; written apart from `diffusion/nvfp4.py`'s table and reshapes):
- byte j of row r holds numbers 2j (high nibble) and 2j + 1 (low nibble);
- a code is sign (bit 3), exponent (bits 2-1), mantissa (bit 0): 0.5 x m when the exponent is
  0, else 2^(e - 1) x (1 + m / 2);
- the scale of row r, block c sits in tile (r // 128, c // 4), 512 bytes a tile row-major, at
  (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4 inside it;
- a number is its code's value x (per-tensor scale x its block's scale)."""

from __future__ import annotations

import torch

BLOCK = 16


def code_value(code: int) -> float:
    sign = -1.0 if code & 8 else 1.0
    exponent, mantissa = (code >> 1) & 3, code & 1
    magnitude = 0.5 * mantissa if exponent == 0 else 2.0 ** (exponent - 1) * (1 + mantissa / 2)
    return sign * magnitude


def blocked_index(row: int, block: int, blocks: int) -> int:
    """Where the scale of (row, block) sits in the blocked layout's flat bytes."""
    column_tiles = -(-blocks // 4)
    tile = (row // 128) * column_tiles + block // 4
    return tile * 512 + (row % 32) * 16 + ((row % 128) // 32) * 4 + block % 4


def blocked(scales: torch.Tensor) -> torch.Tensor:
    """[rows, blocks] float8 scales laid out as ComfyUI stores them (2-D, padded with zeros)."""
    rows, blocks = scales.shape
    padded_rows, padded_blocks = -(-rows // 128) * 128, -(-blocks // 4) * 4
    flat = torch.zeros(padded_rows * padded_blocks, dtype=torch.uint8)
    raw = scales.view(torch.uint8)
    for row in range(rows):
        for block in range(blocks):
            flat[blocked_index(row, block, blocks)] = raw[row, block]
    return flat.view(torch.float8_e4m3fn).reshape(padded_rows, padded_blocks)


def by_hand(packed: torch.Tensor, scales: torch.Tensor, tensor_scale: torch.Tensor) -> torch.Tensor:
    """The float32 weight of an NVFP4 layer (`scales`: as stored, blocked)."""
    rows, columns = packed.shape[0], 2 * packed.shape[1]
    flat = scales.reshape(-1).view(torch.uint8)
    out = torch.empty(rows, columns, dtype=torch.float32)
    values = [code_value(c) for c in range(16)]
    second = tensor_scale.to(torch.float32).reshape(())
    for row in range(rows):
        for block in range(columns // BLOCK):
            byte = flat[blocked_index(row, block, columns // BLOCK)].reshape(1)
            scale = second * byte.view(torch.float8_e4m3fn).to(torch.float32)[0]
            for i in range(block * BLOCK, (block + 1) * BLOCK):
                pair = int(packed[row, i // 2])
                code = pair >> 4 if i % 2 == 0 else pair & 15
                out[row, i] = torch.tensor(values[code], dtype=torch.float32) * scale
    return out
