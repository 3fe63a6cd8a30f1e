"""int8 layers as ComfyUI writes them (its `*_int8` and `*_int8_convrot` files; torch-free):
which keys they use and what their scales and rotation must be.

Pinned from source, not from a real file (no model hub is reachable here):
- Comfy-Org/ComfyUI `comfy/quant_ops.py`: `QUANT_ALGOS["int8_tensorwise"]` stores int8, its only
  parameter `weight_scale` (no input scale: activations are quantized on the fly);
- Comfy-Org/ComfyUI `comfy/ops.py` (`_load_quantized_module`, `_quantized_weight_state_dict`):
  `L.weight_scale` is required, the rotation is read from `L.comfy_quant` (`comfy_quant.py`);
- Comfy-Org/comfy-kitchen `comfy_kitchen/tensor/int8.py` (`TensorWiseINT8Layout`): a weight is
  quantized with one float32 scale (`per_channel` off) or one per row, shape [rows, 1]; a rotated
  weight always per row;
- comfy-kitchen `comfy_kitchen/backends/eager/quantization.py` (`quantize_int8_rowwise`,
  `quantize_int8_convrot_weight`, `dequantize_int8_convrot_weight`, `int8_linear`, which also
  takes per-row scales flat, [rows]) and `comfy_kitchen/tensor/int8_utils.py` (the rotation).

A layer `L` stores
- `L.weight`: int8 [rows, columns], round(w' / scale) clamped to [-128, 127];
- `L.weight_scale`: float32, one number, or one per row (max |row| / 127);
- `L.comfy_quant`: `{"format": "int8_tensorwise"}`, or with `"convrot": true,
  "convrot_groupsize": G` when w' is the weight rotated: each run of G columns of a row
  multiplied by the transposed G x G Hadamard matrix (`diffusion/int8.py` builds it). G is a
  power of 4 that divides the columns: comfy-kitchen refuses a layer it does not divide
  (`_rotate_weight`), so converters leave such layers unrotated.
"""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.diffusion.files.comfy_quant import QuantMarker
from inline_core.diffusion.files.header import TensorInfo

FORMAT = "int8_tensorwise"  # `comfy_quant`'s format name
STORED = "I8"  # the weight's safetensors dtype
SCALE = ".weight_scale"
SCALE_DTYPES = ("F32", "BF16", "F16")


def int8_weights(header: Mapping[str, TensorInfo]) -> dict[str, str]:
    """Each int8 weight's key -> its layer."""
    return {
        key: key.removesuffix(".weight")
        for key, info in header.items()
        if key.endswith(".weight") and info.dtype == STORED
    }


def problem(header: Mapping[str, TensorInfo], weight: str, layer: str) -> str | None:
    """What about this int8 layer's tensors is not ComfyUI's layout (None: nothing)."""
    info = header[weight]
    if len(info.shape) != 2:
        return f"{weight} is int8 of shape {info.shape}, not a matrix"
    rows = info.shape[0]
    scale = header.get(layer + SCALE)
    numbers = 1
    for side in scale.shape if scale is not None else ():
        numbers *= side
    per_row = scale is not None and scale.shape in ((rows, 1), (rows,))
    if scale is None or scale.dtype not in SCALE_DTYPES or not (numbers == 1 or per_row):
        got = "missing" if scale is None else f"{scale.dtype} {scale.shape}"
        return (
            f"{layer}{SCALE} is {got}, where an int8 layer of {rows} rows keeps one float "
            f"scale or one a row ({rows}, 1)"
        )
    return None


def rotation_problem(marker: QuantMarker, columns: int, layer: str) -> str | None:
    """What about a rotated layer's group size is not ComfyUI's (None: nothing)."""
    group = marker.convrot_groupsize
    if not is_power_of_four(group):
        return f"{layer} is rotated in groups of {group}, not a power of 4 (ComfyUI's convrot)"
    if columns % group:
        return f"{layer} is rotated in groups of {group}, which do not divide its {columns} columns"
    return None


def is_power_of_four(value: int) -> bool:
    """4, 16, 64, 256, ...: the sizes of comfy-kitchen's regular Hadamard matrices."""
    while value > 4 and value % 4 == 0:
        value //= 4
    return value == 4
