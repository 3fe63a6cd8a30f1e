"""fp8 weight files and their scales, as ComfyUI writes them (torch-free).

A `*_fp8_e4m3fn` file stores its layers' weights in `float8_e4m3fn` (or `float8_e5m2`) and the
rest in a wider float. A `*_fp8_scaled` file also gives each fp8 linear layer a per-tensor
`<layer>.scale_weight`: the layer's weight is the stored one times that scale. Its
`<layer>.scale_input` only matters to an fp8 matrix multiply (a weight computed in a wider float
ignores it), and a `scaled_fp8` key (an empty tensor) only marks the file. ComfyUI's newer
per-layer quantization names the same scale `<layer>.weight_scale` beside `input_scale` and a
`comfy_quant` description.

These keys are not weights: a file's shapes leave them out, so a format recognises and configures
a scaled file as it does the plain one, and the loader applies the scales it finds here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")

# safetensors' names of the fp8 dtypes, as torch names them.
FP8_DTYPES = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
# A layer's per-tensor weight scale, in ComfyUI's `*_fp8_scaled` files and its newer naming.
WEIGHT_SCALES = (".scale_weight", ".weight_scale")
# Keys that say how an fp8 matrix multiply quantizes its input, or mark the file's format.
INPUT_SCALES = (".scale_input", ".input_scale", ".comfy_quant")
# An NVFP4 layer's per-tensor scale (its `.weight_scale` holds block scales: `nvfp4.py`).
NVFP4_TENSOR_SCALE = ".weight_scale_2"
MARKER = "scaled_fp8"


def is_scale_key(key: str) -> bool:
    """A key that holds a scale or a format marker, not a weight."""
    suffixes = ("." + MARKER, *WEIGHT_SCALES, *INPUT_SCALES, NVFP4_TENSOR_SCALE)
    return key == MARKER or key.endswith(suffixes)


def scaled_weight(key: str) -> str | None:
    """The weight a per-tensor weight scale belongs to; None for any other key."""
    for suffix in WEIGHT_SCALES:
        if key.endswith(suffix):
            return key[: -len(suffix)] + ".weight"
    return None


def weights_only(header: Mapping[str, T]) -> dict[str, T]:
    """`header` without its scale and marker keys: what a format recognises and configures."""
    return {k: v for k, v in header.items() if not is_scale_key(k)}
