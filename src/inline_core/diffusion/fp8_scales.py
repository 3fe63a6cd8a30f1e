"""A scaled fp8 file's per-tensor weight scales carried through a format's renaming (torch).

A format renames a file's keys (and may split a fused weight into views, as Z-Image's `qkv`
becomes `to_q`/`to_k`/`to_v`), so a scale keyed by the file's weight name is found again by
memory: a converted tensor that lies inside a scaled weight's bytes is that weight, or part of
it, and takes its scale. A weight the renaming copied instead (a concatenation) is multiplied out
before renaming, in the compute dtype. See `files/scales.py` for the keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from inline_core.diffusion.files.scales import is_scale_key, scaled_weight
from inline_core.errors import RunFailed

Convert = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]
FP8 = frozenset({torch.float8_e4m3fn, torch.float8_e5m2})


@dataclass(frozen=True)
class Converted:
    """A file's state renamed to the library's keys, with each scaled weight's scale by its new
    key (a weight split in parts: each part)."""

    state: dict[str, torch.Tensor]
    scales: dict[str, torch.Tensor]


def split_scales(
    raw: Mapping[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(the weights, each scaled weight's scale by the weight's key); markers and input scales
    dropped. A scale on a weight that is not fp8 is another quantization: refused."""
    weights = {k: v for k, v in raw.items() if not is_scale_key(k)}
    scales: dict[str, torch.Tensor] = {}
    for key, value in raw.items():
        weight = scaled_weight(key)
        if weight is None or weight not in weights:
            continue
        if weights[weight].dtype not in FP8:
            raise RunFailed(
                f"{weight} is quantized as {weights[weight].dtype} with a scale: only fp8 "
                "weights with per-tensor scales are supported"
            )
        if value.numel() != 1:
            raise RunFailed(f"{key} is not one per-tensor scale (shape {tuple(value.shape)})")
        scales[weight] = value.reshape(()).to(torch.float32)
    return weights, scales


def convert_scaled(
    weights: dict[str, torch.Tensor],
    scales: Mapping[str, torch.Tensor],
    convert: Convert,
    dtype: torch.dtype,
) -> Converted:
    """`convert(weights)`, each scale following its weight; a weight the conversion copied is
    dequantized to `dtype` first and converted again."""
    state = convert(dict(weights))
    found, traced = _trace(state, weights, scales)
    lost = set(scales) - traced
    if lost:
        weights = {
            k: dequantize(v, scales[k], dtype) if k in lost else v for k, v in weights.items()
        }
        state = convert(dict(weights))
        found, _ = _trace(state, weights, {k: v for k, v in scales.items() if k not in lost})
    return Converted(state, found)


def dequantize(weight: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A stored fp8 weight times its scale, in `dtype` (the layer's own arithmetic)."""
    return weight.to(dtype) * scale.to(device=weight.device, dtype=dtype)


def _trace(
    state: Mapping[str, torch.Tensor],
    weights: Mapping[str, torch.Tensor],
    scales: Mapping[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], set[str]]:
    spans = sorted((_span(weights[k]), k) for k in scales)
    found: dict[str, torch.Tensor] = {}
    traced: set[str] = set()
    for key, tensor in state.items():
        if tensor.dtype not in FP8:
            continue
        start = tensor.data_ptr()
        for (low, high), original in spans:
            if low <= start < high and _span(tensor)[1] <= high:
                found[key] = scales[original]
                traced.add(original)
                break
    return found, traced


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    start = tensor.data_ptr()
    return start, start + tensor.numel() * tensor.element_size()
