"""NVFP4 layers as ComfyUI writes them (its `*_fp4_mixed` files; torch-free): which keys they
use and what shape their weights have.

The layout follows ComfyUI's code (`comfy/ops.py`'s mixed-precision loading, `comfy/float.py`
and comfy-kitchen's `TensorCoreNVFP4Layout` and eager `dequantize_nvfp4`), not a real file: no
model hub is reachable here. A layer `L` stores
- `L.weight`: uint8 [rows, columns / 2], two e2m1 codes a byte, the first number of a pair in the
  high nibble;
- `L.weight_scale`: float8_e4m3fn, one scale per 16 numbers of a row, in cuBLAS's blocked
  layout (rows padded to 128, scale columns to 4, `diffusion/nvfp4.py` unswizzles it);
- `L.weight_scale_2`: a float32 per-tensor scale;
- `L.comfy_quant`: uint8 bytes of JSON, `{"format": "nvfp4"}`; maybe `L.input_scale`, which
  only an fp4 matrix multiply reads.
A weight is code value x (`weight_scale_2` x its block's `weight_scale`). ComfyUI pads a layer
to multiples of 16 on both sides and takes the real shape from the module, which a file does not
state: the shape read here is the stored one (Gemma 3 12B's layers need no padding).
"""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.diffusion.files.header import TensorInfo
from inline_core.diffusion.files.scales import NVFP4_TENSOR_SCALE

FORMAT = "nvfp4"  # `comfy_quant`'s format name
PACKED = "U8"  # the weight's safetensors dtype
BLOCK_SCALE_DTYPE = "F8_E4M3"
# ComfyUI views block scales as float8_e4m3fn whatever byte dtype holds them, and casts the
# per-tensor scale to float32 (comfy-kitchen's layout parameters).
BLOCK_SCALE_DTYPES = (BLOCK_SCALE_DTYPE, PACKED)
TENSOR_SCALE_DTYPES = ("F32", "BF16", "F16")
BLOCK = 16  # numbers per block scale
TILE_ROWS, TILE_COLUMNS = 128, 4  # the blocked scale layout's tile
BLOCK_SCALE = ".weight_scale"


def _roundup(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def layer_of(key: str) -> str | None:
    """The layer an NVFP4 per-tensor scale key belongs to (None: another key)."""
    return key.removesuffix(NVFP4_TENSOR_SCALE) if key.endswith(NVFP4_TENSOR_SCALE) else None


def packed_weights(header: Mapping[str, TensorInfo]) -> dict[str, str]:
    """Each NVFP4 weight's key -> its layer: a uint8 weight beside a per-tensor `weight_scale_2`."""
    found: dict[str, str] = {}
    for key in header:
        layer = layer_of(key)
        weight = header.get(f"{layer}.weight") if layer is not None else None
        if layer is not None and weight is not None and weight.dtype == PACKED:
            found[f"{layer}.weight"] = layer
    return found


def block_scale_shape(rows: int, columns: int) -> tuple[int, int]:
    """The blocked `weight_scale`'s shape for a weight of `rows` x `columns` numbers."""
    return _roundup(rows, TILE_ROWS), _roundup(columns // BLOCK, TILE_COLUMNS)


def problem(header: Mapping[str, TensorInfo], weight: str, layer: str) -> str | None:
    """What about this NVFP4 layer's tensors is not ComfyUI's layout (None: nothing)."""
    info = header[weight]
    if len(info.shape) != 2:
        return f"{weight} is packed fp4 of shape {info.shape}, not a matrix"
    rows, columns = info.shape[0], 2 * info.shape[1]
    scale = header.get(layer + BLOCK_SCALE)
    want = block_scale_shape(rows, columns)
    if (
        columns % BLOCK
        or scale is None
        or scale.dtype not in BLOCK_SCALE_DTYPES
        or scale.shape != want
    ):
        got = "none" if scale is None else f"{scale.dtype} {scale.shape}"
        return (
            f"{layer}{BLOCK_SCALE} is {got}, where NVFP4 keeps {BLOCK_SCALE_DTYPE} {want} "
            f"block scales for {rows} x {columns} numbers"
        )
    second = header[layer + NVFP4_TENSOR_SCALE]
    if second.dtype not in TENSOR_SCALE_DTYPES or any(side != 1 for side in second.shape):
        return f"{layer}{NVFP4_TENSOR_SCALE} is {second.dtype} {second.shape}, not one float"
    return None


def stray_scales(header: Mapping[str, TensorInfo]) -> list[str]:
    """NVFP4 per-tensor scales beside a weight that is not packed: a layout not ComfyUI's."""
    found = packed_weights(header).values()
    return [k for k in header if (layer := layer_of(k)) is not None and layer not in found]


def unpacked(header: Mapping[str, TensorInfo]) -> dict[str, TensorInfo]:
    """`header` with each NVFP4 weight at the shape it has once dequantized (twice the columns)."""
    out = dict(header)
    for weight in packed_weights(header):
        info = header[weight]
        if len(info.shape) == 2:
            out[weight] = TensorInfo(FORMAT, (info.shape[0], 2 * info.shape[1]))
    return out
