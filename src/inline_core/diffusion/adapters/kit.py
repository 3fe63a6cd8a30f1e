"""Tiny random LoRAs for a family's kit: low-rank pairs for chosen linear layers of a model,
written in any trainer's naming (a family's kit says which namings and layers: `Naming`s, one
file each, written by `write_namings`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from inline_core.diffusion.adapters.weights import modules_of
from inline_core.diffusion.libs import save_safetensors


@dataclass(frozen=True)
class KitLora:
    """A random LoRA: per module its (down, up) pair, of one rank."""

    rank: int
    pairs: Mapping[str, tuple[torch.Tensor, torch.Tensor]]


def random_lora(model: nn.Module, modules: Iterable[str], rank: int, seed: int) -> KitLora:
    """Down and up matrices for `modules` of `model`, drawn from `seed`; the up matrices are not
    zero (as a trained LoRA's are not), so the LoRA changes the picture."""
    generator = torch.Generator("cpu").manual_seed(seed)
    named = modules_of(model)
    pairs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name in modules:
        layer = named[name]
        if not isinstance(layer, nn.Linear):
            raise ValueError(f"{name} is not a linear layer")
        down = torch.randn(rank, layer.in_features, generator=generator) / layer.in_features**0.5
        up = torch.randn(layer.out_features, rank, generator=generator) * 0.2 / rank**0.5
        pairs[name] = (down, up)
    return KitLora(rank, pairs)


def write_lora(
    lora: KitLora,
    path: Path,
    key: Callable[[str], str],
    *,
    down: str,
    up: str,
    alpha: float | None = None,
    peft_alpha: float | None = None,
) -> Path:
    """Write `lora` with each module's tensors named `key(module) + down/up`; `alpha` writes a
    per-layer `.alpha` (kohya's), `peft_alpha` diffusers' adapter metadata (`lora_alpha`). The
    weights are scaled so every naming renders the same: a reader applies `alpha / rank`."""
    tensors: dict[str, torch.Tensor] = {}
    per_layer = alpha if alpha is not None else peft_alpha
    fold = 1.0 if per_layer is None else lora.rank / per_layer
    for module, (down_w, up_w) in lora.pairs.items():
        tensors[key(module) + down] = down_w.contiguous()
        tensors[key(module) + up] = (up_w * fold).contiguous()
        if alpha is not None:
            tensors[key(module) + ".alpha"] = torch.tensor(float(alpha))
    metadata = {"format": "pt"}
    if peft_alpha is not None:
        config = {"r": lora.rank, "lora_alpha": peft_alpha, "target_modules": sorted(lora.pairs)}
        metadata["lora_adapter_metadata"] = json.dumps(
            {f"transformer.{k}": v for k, v in config.items()}
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors(tensors, path, metadata)
    return path


@dataclass(frozen=True)
class Naming:
    """One trainer's naming a kit LoRA is written in (`write_lora`'s arguments)."""

    key: str  # the kit's name for the file
    suffix: str  # after the file's stem
    tensor: Callable[[str], str]  # a module's tensors' name before `down`/`up`
    down: str
    up: str
    alpha: float | None = None
    peft_alpha: float | None = None


def write_namings(
    lora: KitLora, folder: Path, stem: str, namings: Iterable[Naming]
) -> dict[str, Path]:
    """`lora` in each of `namings`, as `folder/<stem><suffix>.safetensors`, by naming key."""
    return {
        n.key: write_lora(
            lora,
            folder / f"{stem}{n.suffix}.safetensors",
            n.tensor,
            down=n.down,
            up=n.up,
            alpha=n.alpha,
            peft_alpha=n.peft_alpha,
        )
        for n in namings
    }
