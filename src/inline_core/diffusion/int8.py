"""int8 layers dequantized at load, in the compute dtype (torch): what ComfyUI does with them
where it has no int8 matrix multiply (comfy-kitchen's eager `dequantize_int8_simple` and
`dequantize_int8_convrot_weight`).

The keys, scales and group sizes are `files/int8.py`'s, with its sources. The arithmetic is
comfy-kitchen's, rounded once to float32 (`dequantize` says how) and cast to the compute dtype:
- w' = int8 x scale (one scale, or one a row);
- a rotated layer is rotated back: each run of G columns of w' times Hᵀ, where H is the
  normalized regular Hadamard matrix of comfy-kitchen's `_build_hadamard`
  (`comfy_kitchen/tensor/int8_utils.py`): the Kronecker power of the symmetric
  [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]], divided by sqrt(G); no random signs, nothing
  stored in the file. H is symmetric and orthogonal, so Hᵀ undoes the Hᵀ the weight was rotated
  with (`_rotate_weight`: W_rot = W Hᵀ), and comfy-kitchen's dequantization is that same
  `_rotate_weight` applied again.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import torch

from inline_core.diffusion.comfy_quant import read_marker
from inline_core.diffusion.files import int8 as layout
from inline_core.diffusion.files.comfy_quant import MARKER, unread_format
from inline_core.diffusion.files.header import TensorInfo
from inline_core.errors import RunFailed

H4 = ((1, 1, 1, -1), (1, 1, -1, 1), (1, -1, 1, 1), (-1, 1, 1, 1))
ROWS_AT_ONCE = 1 << 24  # numbers rotated back at once: 64 MiB of float32 however large the layer


@functools.lru_cache(maxsize=8)
def hadamard_signs(size: int) -> torch.Tensor:
    """The +-1 entries of comfy-kitchen's regular Hadamard matrix of `size` (a power of 4), as
    float32: the Kronecker power of the 4 x 4 seed."""
    if not layout.is_power_of_four(size):
        raise ValueError(f"a regular Hadamard matrix has a power-of-4 size, not {size}")
    base = torch.tensor(H4, dtype=torch.float32)
    h = base
    while h.shape[0] < size:
        h = torch.kron(h, base)
    return h


def hadamard(size: int) -> torch.Tensor:
    """comfy-kitchen's normalized regular Hadamard matrix (`_build_hadamard`), float32."""
    return hadamard_signs(size) / (size**0.5)


def dequantize(
    stored: torch.Tensor, scale: torch.Tensor, group: int | None, dtype: torch.dtype
) -> torch.Tensor:
    """One int8 weight as `dtype` numbers; `group`: the rotation's group size (None: not
    rotated). Exact before one rounding to float32: a row's scale is common to its run, so
    (q x s) Hᵀ = (q Hᵀ±) x s / sqrt(G), where Hᵀ± holds H's signs; every partial sum of q Hᵀ±
    is a whole number of at most 128 x G (under 2^24 for G up to 4^8), exact in float32
    whatever the order of the sums, and sqrt(G) is a power of 2. comfy-kitchen's float32 matmul
    of (q x s) by H rounds along the way, within a few float32 units of this (as fast here)."""
    rows, columns = stored.shape
    scales = scale.to(stored.device, torch.float32).reshape(-1, 1)  # one a row, or one
    signs = hadamard_signs(group).to(stored.device) if group is not None else None
    out = torch.empty(rows, columns, dtype=dtype, device=stored.device)
    step = max(1, ROWS_AT_ONCE // columns)  # a large table (an embedding) a few rows at a time
    for start in range(0, rows, step):
        part = slice(start, start + step)
        numbers = stored[part].to(torch.float32)
        factor = scales[part] if len(scales) > 1 else scales
        if signs is not None and group is not None:
            runs = numbers.reshape(-1, columns // group, group)
            numbers = torch.matmul(runs, signs.T).reshape(-1, columns)
            factor = factor / (group**0.5)
        out[part] = (numbers * factor).to(dtype)
    return out


def dequantize_layers(
    raw: Mapping[str, torch.Tensor], dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """`raw` with each int8 layer's weight dequantized to `dtype` (rotated back where its marker
    says so) and its scale and marker gone; a layer not in ComfyUI's int8 layout, unmarked, or
    marked as another format raises `RunFailed` naming it."""
    header = {k: TensorInfo(_dtype_name(v), tuple(v.shape)) for k, v in raw.items()}
    out = dict(raw)
    for weight, layer in layout.int8_weights(header).items():
        problem = layout.problem(header, weight, layer)
        if problem is not None:
            raise RunFailed(problem)
        stored = out.pop(layer + MARKER, None)
        if stored is None:
            raise RunFailed(
                f"{weight} is int8 without its {layer}{MARKER}, which says whether it is "
                "rotated: not ComfyUI's int8 layout"
            )
        marker = read_marker(stored, layer)
        if marker.format != layout.FORMAT:
            raise RunFailed(
                unread_format(marker, layer)
                or f"{layer} is stored as int8 but its {MARKER[1:]} names format "
                f"{marker.format!r}, not {layout.FORMAT!r}"
            )
        group = marker.convrot_groupsize if marker.convrot else None
        if group is not None:
            found = layout.rotation_problem(marker, header[weight].shape[1], layer)
            if found is not None:
                raise RunFailed(found)
        out[weight] = dequantize(out[weight], out.pop(layer + layout.SCALE), group, dtype)
    return out


def _dtype_name(tensor: torch.Tensor) -> str:
    """safetensors' name for the dtypes int8's layout checks."""
    names = {
        torch.int8: layout.STORED,
        torch.float32: "F32",
        torch.bfloat16: "BF16",
        torch.float16: "F16",
    }
    return names.get(tensor.dtype, str(tensor.dtype))
