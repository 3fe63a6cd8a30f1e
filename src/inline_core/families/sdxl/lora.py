"""Reading an SDXL kohya LoRA (torch side): one reader per model it may adapt (the UNet and
each text encoder), each reading only its own part's tensors, with kohya's `alpha / rank` folded
into the up matrices; a file that adapts none of a part's layers is empty for that part."""

from __future__ import annotations

from pathlib import Path

import torch

from inline_core.diffusion.adapters.bank import Reader
from inline_core.diffusion.adapters.naming import read_layout, split_key
from inline_core.diffusion.adapters.weights import DOWN, UP, LoraWeights, from_state_dict
from inline_core.diffusion.files.header import read_header
from inline_core.diffusion.libs import module
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.lora_naming import (
    PREFIX,
    SDXL_LORAS,
    UNET,
    split_layer,
    text_module,
    unet_module,
)

TEXT_MODEL = "text_model."


def part_reader(part: str, *, layers_per_block: int = 2, text_model: bool = True) -> Reader:
    """A reader of the `part` half of SDXL kohya files: `layers_per_block` is the UNet's
    (its original block numbers map onto it); `text_model` whether the encoder's modules sit
    under `text_model.` (transformers' `CLIPTextModelWithProjection`) or at its top
    (`CLIPTextModel`)."""

    def to_module(layer: str) -> str | None:
        if part == UNET:
            return unet_module(layer, layers_per_block)
        found = text_module(layer)
        return found if found is None or text_model else found.removeprefix(TEXT_MODEL)

    def read(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
        keys = read_header(Path(path))
        read_layout(name, keys, SDXL_LORAS)  # refuse another model's file first
        wanted: dict[str, list[str]] = {}
        for key in keys:
            parts = split_key(key)
            split = None if parts is None else split_layer(parts[0][len(PREFIX) :])
            if parts is not None and split is not None and split[0] == part:
                wanted.setdefault(parts[0], []).append(key)
        if not wanted:
            return LoraWeights(name, {})
        tensors = _load(path, [k for ks in wanted.values() for k in ks])
        state: dict[str, torch.Tensor] = {}
        for layer, _keys in wanted.items():
            split = split_layer(layer[len(PREFIX) :])
            assert split is not None
            target = to_module(split[1])
            if target is None:
                raise InvalidRequest(f"loras/{name}: {layer!r} is no layer of SDXL's {part}")
            down = tensors[f"{layer}.lora_down.weight"]
            if down.dim() != 2:
                raise InvalidRequest(
                    f"loras/{name}: {layer!r} is not a linear layer's pair (shape "
                    f"{tuple(down.shape)}); SDXL applies LoRAs per request on linear layers only"
                )
            alpha = tensors.get(f"{layer}.alpha")
            rank = int(down.shape[0])
            scale = 1.0 if alpha is None else float(alpha) / rank
            state[target + DOWN] = down
            state[target + UP] = tensors[f"{layer}.lora_up.weight"].to(torch.float32) * scale
        return from_state_dict(name, state, prefix="", alpha=None, device=device, dtype=dtype)

    return read


def _load(path: str, keys: list[str]) -> dict[str, torch.Tensor]:
    safe_open = module("safetensors").safe_open
    with safe_open(path, framework="pt") as f:
        return {k: f.get_tensor(k) for k in keys}
