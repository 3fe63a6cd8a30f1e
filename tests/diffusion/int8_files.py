"""ComfyUI's int8 layers dequantized by hand, line by line, as comfy-kitchen's eager code does it
(the parity tests' reference; the loader's code is not used here), and files written with them."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from inline_core.diffusion.libs import load_safetensors, save_safetensors

SEED = ((1, 1, 1, -1), (1, 1, -1, 1), (1, -1, 1, 1), (-1, 1, 1, 1))


def regular_hadamard(size: int) -> torch.Tensor:
    """The Kronecker power of the 4 x 4 seed, entry by entry: H[i, j] is the product of the
    seed's entries at each pair of base-4 digits of i and j (the first factor the most
    significant), divided by sqrt(size)."""
    h = torch.empty(size, size, dtype=torch.float32)
    for i in range(size):
        for j in range(size):
            sign, a, b, step = 1, i, j, size
            while step > 1:
                step //= 4
                sign *= SEED[a // step][b // step]
                a, b = a % step, b % step
            h[i, j] = sign
    return h / (size**0.5)


def dequantize_by_hand(stored: torch.Tensor, scale: torch.Tensor, marker: bytes) -> torch.Tensor:
    """Each number times its row's scale (or the one scale); then, for a layer marked `convrot`,
    each run of G columns times the transposed Hadamard matrix (output c of a row's run: the sum
    over i of run[i] x H[c, i]); in float64, where all of it is exact, rounded to float32 at the
    end. A few thousand rows at a time (an embedding table has many)."""
    conf = json.loads(marker)
    rows, columns = stored.shape
    scales = scale.to(torch.float64).reshape(-1)
    per_row = scales.reshape(-1, 1) if scales.numel() > 1 else scales.reshape(1, 1)
    out = stored.to(torch.float64) * per_row
    if conf.get("convrot"):
        group = int(conf.get("convrot_groupsize", 256))
        ht = regular_hadamard(group).to(torch.float64).T
        for first in range(0, rows, 4096):
            for start in range(0, columns, group):
                run = out[first : first + 4096, start : start + group].clone()
                rotated = (run.unsqueeze(2) * ht.unsqueeze(0)).sum(dim=1)
                out[first : first + 4096, start : start + group] = rotated
    return out.to(torch.float32)


def write_dequantized(int8_file: Path, target: Path, dtype: torch.dtype) -> None:
    """`int8_file`'s weights dequantized by hand into `dtype`, the rest as stored, to `target`."""
    raw = load_safetensors(int8_file)
    out: dict[str, torch.Tensor] = {}
    for key, value in raw.items():
        if key.endswith((".weight_scale", ".comfy_quant")):
            continue
        if value.dtype == torch.int8:
            layer = key.removesuffix(".weight")
            marker = raw[layer + ".comfy_quant"].numpy().tobytes()
            value = dequantize_by_hand(value, raw[layer + ".weight_scale"], marker).to(dtype)
        out[key] = value
    save_safetensors(out, target)
