"""The tiny kit's LoRAs, in kohya's naming as sd-scripts writes SDXL's (the UNet in the original
block naming): `A` adapts the UNet (every transformer block's attention, feed-forward and
projections, and a resnet's timestep projection) and both text encoders; `B` adapts other UNet
layers (the up blocks' feed-forward and outputs) alone. Written into `loras/`; and a tiny
textual-inversion embedding into `embeddings/`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from inline_core.diffusion.adapters.kit import random_lora
from inline_core.diffusion.adapters.weights import modules_of
from inline_core.diffusion.libs import save_safetensors
from inline_core.families.sdxl import unet

RANK, ALPHA = 4, 2.0
_ATTENTION = tuple(f"{a}.{p}" for a in ("attn1", "attn2") for p in ("to_q", "to_k", "to_v"))
_BLOCK = (*_ATTENTION, "attn1.to_out.0", "attn2.to_out.0", "ff.net.0.proj", "ff.net.2")
_TEXT = (*(f"self_attn.{p}_proj" for p in ("q", "k", "v", "out")), "mlp.fc1", "mlp.fc2")


def _unet_a(model: nn.Module) -> list[str]:
    names = modules_of(model)
    picked = [n for n in names if n.endswith(_BLOCK) or n.endswith((".proj_in", ".proj_out"))]
    return [*picked, "down_blocks.0.resnets.0.time_emb_proj"]


def _unet_b(model: nn.Module) -> list[str]:
    ends = ("ff.net.0.proj", "ff.net.2", "attn1.to_out.0", "proj_out")
    return [n for n in modules_of(model) if n.startswith("up_blocks.") and n.endswith(ends)]


def _text(model: nn.Module) -> list[str]:
    return [n for n in modules_of(model) if n.endswith(_TEXT)]


def unet_kohya(module: str, config: Mapping[str, Any]) -> str:
    """kohya's name for a UNet module: its original block name, underscored."""
    (ldm,) = unet.to_ldm({f"{module}.weight": torch.zeros(0)}, config)
    return "lora_unet_" + ldm.removesuffix(".weight").replace(".", "_")


def text_kohya(module: str, which: str) -> str:
    full = module if module.startswith("text_model.") else "text_model." + module
    return f"lora_{which}_" + full.replace(".", "_")


def _tensors(
    model: nn.Module, modules: list[str], seed: int, name: Callable[[str], str]
) -> dict[str, torch.Tensor]:
    lora = random_lora(model, modules, RANK, seed)
    tensors: dict[str, torch.Tensor] = {}
    for module, (down, up) in lora.pairs.items():
        key = name(module)
        tensors[f"{key}.lora_down.weight"] = down.contiguous()
        # Folded back by the reader's `alpha / rank`, as kohya's trainers store it.
        tensors[f"{key}.lora_up.weight"] = (up * RANK / ALPHA).contiguous()
        tensors[f"{key}.alpha"] = torch.tensor(ALPHA)
    return tensors


def write_kit_loras(
    out: Path, name: str, unet_model: Any, first: Any, second: Any
) -> dict[str, Path]:
    """`loras/<name>_lora_a.safetensors` (UNet and both text encoders) and `..._lora_b`."""
    config = dict(unet_model.config)
    a = {
        **_tensors(unet_model, _unet_a(unet_model), 21, lambda m: unet_kohya(m, config)),
        **_tensors(first, _text(first), 22, lambda m: text_kohya(m, "te1")),
        **_tensors(second, _text(second), 23, lambda m: text_kohya(m, "te2")),
    }
    b = _tensors(unet_model, _unet_b(unet_model), 24, lambda m: unet_kohya(m, config))
    folder = out / "loras"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"a": folder / f"{name}_lora_a.safetensors", "b": folder / f"{name}_lora_b.safetensors"}
    for key, tensors in (("a", a), ("b", b)):
        save_safetensors(tensors, paths[key], {"format": "pt"})
    return paths


def write_kit_embedding(out: Path, name: str, first: Any, second: Any) -> Path:
    """`embeddings/<name>_embedding.safetensors`: a two-vector textual inversion in SDXL's
    layout (`clip_l`, `clip_g`), drawn at each encoder's token embedding scale."""
    generator = torch.Generator("cpu").manual_seed(25)
    tensors: dict[str, torch.Tensor] = {}
    for key, model in (("clip_l", first), ("clip_g", second)):
        table = model.get_input_embeddings().weight.detach()
        tensors[key] = torch.randn(2, table.shape[1], generator=generator) * float(table.std()) * 3
    path = out / "embeddings" / f"{name}_embedding.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors(tensors, path, {"format": "pt"})
    return path
