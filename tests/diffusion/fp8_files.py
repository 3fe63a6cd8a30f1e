"""Tiny fp8 weight files made from the kits' float32 ones, as ComfyUI writes them, and the same
weights upcast by hand (the parity tests' reference)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from inline_core.diffusion.libs import load_safetensors, save_safetensors

E4M3_MAX = 448.0  # the largest float8_e4m3fn


def is_layer_weight(key: str, tensor: torch.Tensor) -> bool:
    """A linear layer's weight: what ComfyUI's fp8 files store in fp8 (norms and biases stay)."""
    return key.endswith(".weight") and tensor.ndim == 2


def write_fp8(
    source: Path,
    target: Path,
    reference: Path,
    *,
    scaled: bool,
    dtype: torch.dtype,
    mixed: bool = False,
) -> None:
    """`source`'s layer weights in `dtype` (scaled: each divided by a per-tensor scale first,
    with ComfyUI's `scale_weight`, `scale_input` and `scaled_fp8` keys; `mixed` too: with its
    newer per-layer `weight_scale`, `input_scale` and `comfy_quant` keys instead, as the
    `*_fp8mixed` files hold them) to `target`, and the very numbers that file holds, upcast by
    hand to float32, to `reference`."""
    stored: dict[str, torch.Tensor] = {}
    upcast: dict[str, torch.Tensor] = {}
    for key, value in load_safetensors(source).items():
        if not is_layer_weight(key, value):
            stored[key] = upcast[key] = value
            continue
        stem = key.removesuffix(".weight")
        scale = (value.abs().max() / E4M3_MAX).clamp(min=1e-12) if scaled else torch.tensor(1.0)
        low = (value / scale).to(dtype) if scaled else value.to(dtype)
        stored[key] = low
        upcast[key] = low.to(torch.float32) * scale.to(torch.float32)
        if scaled and mixed:
            stored[f"{stem}.weight_scale"] = scale.reshape(()).to(torch.float32)
            stored[f"{stem}.input_scale"] = torch.ones((), dtype=torch.float32)
            stored[f"{stem}.comfy_quant"] = _quant_description(dtype)
        elif scaled:
            stored[f"{stem}.scale_weight"] = scale.reshape(()).to(torch.float32)
            stored[f"{stem}.scale_input"] = torch.ones((), dtype=torch.float32)
    if scaled and not mixed:
        stored["scaled_fp8"] = torch.empty(0, dtype=dtype)
    target.parent.mkdir(parents=True, exist_ok=True)
    reference.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors(stored, target)
    save_safetensors(upcast, reference)


def _quant_description(dtype: torch.dtype) -> torch.Tensor:
    """A layer's `comfy_quant`: its format as JSON, in bytes."""
    text = json.dumps(
        {"format": str(dtype).removeprefix("torch."), "full_precision_matrix_mult": True}
    )
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8)
