"""ComfyUI's int8 layers written offline, for the kits' tiny `_int8` and `_int8_convrot` files.

The quantizer is written from comfy-kitchen's eager formulas (`quantize_int8_tensorwise`,
`quantize_int8_rowwise`, `quantize_int8_convrot_weight`; `files/int8.py` cites them), not
checked against a real file (no model hub here):
- a rotated weight is first multiplied, G columns at a time, by the transposed Hadamard matrix
  (`int8.hadamard`), in float32;
- its scale is max |w| / 127 over the tensor or over each row (at least 1e-30), float32;
- each number is round(w / scale), clamped to [-128, 127].
A layer whose columns G does not divide is written unrotated, as ComfyUI's converters do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import torch

from inline_core.diffusion.files.comfy_quant import MARKER
from inline_core.diffusion.files.int8 import FORMAT, SCALE
from inline_core.diffusion.int8 import hadamard

TINY = 1e-30  # comfy-kitchen's smallest scale


def marker(group: int | None) -> torch.Tensor:
    """A layer's `comfy_quant`: `int8_tensorwise`, rotated in groups of `group` (None: not)."""
    conf: dict[str, object] = {"format": FORMAT}
    if group is not None:
        conf.update(convrot=True, convrot_groupsize=group)
    return torch.tensor(list(json.dumps(conf).encode()), dtype=torch.uint8)


def quantize_int8(
    weight: torch.Tensor, *, group: int | None, per_row: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 numbers, float32 scale: [rows, 1] per row, else one) of a matrix; `group`: rotate
    in groups of that size first (a rotated weight is always scaled per row)."""
    w = weight.detach().to(torch.float32)
    rows, columns = w.shape
    if group is not None:
        w = torch.matmul(w.reshape(rows, columns // group, group), hadamard(group).T)
        w = w.reshape(rows, columns)
        per_row = True
    top = w.abs().amax(dim=-1, keepdim=True) if per_row else w.abs().amax()
    scale = (top / 127.0).clamp(min=TINY)
    return (w / scale).round().clamp(-128.0, 127.0).to(torch.int8), scale


def int8_layers(
    state: Mapping[str, torch.Tensor],
    *,
    group: int | None,
    per_row: bool = True,
    keep: tuple[str, ...] = (),
) -> dict[str, torch.Tensor]:
    """`state` with each matrix `.weight` (but those whose key starts with one of `keep`)
    quantized to int8 with its scale and marker, rotated where `group` divides its columns."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if not key.endswith(".weight") or value.ndim != 2 or key.startswith(keep):
            out[key] = value
            continue
        layer = key.removesuffix(".weight")
        rotated = group if group is not None and value.shape[1] % group == 0 else None
        out[key], out[layer + SCALE] = quantize_int8(value, group=rotated, per_row=per_row)
        out[layer + MARKER] = marker(rotated)
    return out
