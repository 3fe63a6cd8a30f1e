"""The tiny kit's LoRAs: `A` on the blocks' attention (diffusers/PEFT naming) and `B` on their
feed-forwards, in diffusers/PEFT naming and in BFL's as ComfyUI and ai-toolkit write it (the same
weights, so they render the same pixels), written into `loras/`; and a Turbo-like LoRA in BFL's
naming on every linear layer a FLUX.2 LoRA may adapt (fused q/k/v, the embedders, the shared
modulations, the output layer), as ComfyUI's converted Turbo LoRAs of the dev templates are."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from inline_core.diffusion.adapters.kit import KitLora, random_lora, write_lora
from inline_core.diffusion.libs import save_safetensors
from inline_core.families.flux2.lora_naming import bfl_module
from inline_core.families.flux2.transformer import to_original

RANK = 4
GAIN = 20.0
TURBO_GAIN = 3.0  # every layer adapted: a gentler push keeps the tiny picture a picture
_ATTENTION = ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj")
# B's layers in BFL's naming (no fused q/k/v among them: one layer each).
_B_BFL = {
    "ff.linear_in": "img_mlp.0",
    "ff.linear_out": "img_mlp.2",
    "ff_context.linear_in": "txt_mlp.0",
    "ff_context.linear_out": "txt_mlp.2",
}


def _count(model: nn.Module, name: str) -> int:
    blocks = model.get_submodule(name)
    assert isinstance(blocks, nn.ModuleList)
    return len(blocks)


def lora_a_modules(model: nn.Module) -> list[str]:
    double = [
        f"transformer_blocks.{i}.attn.{p}"
        for i in range(_count(model, "transformer_blocks"))
        for p in _ATTENTION
    ]
    single = [
        f"single_transformer_blocks.{i}.attn.to_qkv_mlp_proj"
        for i in range(_count(model, "single_transformer_blocks"))
    ]
    return double + single


def lora_b_modules(model: nn.Module) -> list[str]:
    return [
        f"transformer_blocks.{i}.{layer}"
        for i in range(_count(model, "transformer_blocks"))
        for layer in _B_BFL
    ]


def _bfl(module: str) -> str:
    _blocks, index, layer = module.split(".", 2)
    return f"diffusion_model.double_blocks.{index}.{_B_BFL[layer]}"


def _strong(lora: KitLora) -> KitLora:
    """The tiny model's picture barely moves under a LoRA of the usual size: make it visible."""
    return KitLora(lora.rank, {k: (d, u * GAIN) for k, (d, u) in lora.pairs.items()})


def write_kit_loras(out: Path, name: str, model: nn.Module) -> dict[str, Path]:
    a = _strong(random_lora(model, lora_a_modules(model), RANK, seed=41))
    b = _strong(random_lora(model, lora_b_modules(model), RANK, seed=42))
    folder = out / "loras"
    pa, pb = ".lora_A.weight", ".lora_B.weight"
    return {
        "a": write_lora(
            a, folder / f"{name}_lora_a.safetensors", "transformer.".__add__, down=pa, up=pb
        ),
        "b": write_lora(
            b, folder / f"{name}_lora_b.safetensors", "transformer.".__add__, down=pa, up=pb
        ),
        "b-bfl": write_lora(b, folder / f"{name}_lora_b_bfl.safetensors", _bfl, down=pa, up=pb),
    }


def write_turbo_loras(out: Path, name: str, model: nn.Module, seed: int = 43) -> dict[str, Path]:
    """`loras/<name>_turbo_lora.safetensors`: a pair on each linear layer of the model's BFL
    state dict that the naming adapts, at its BFL shape (q/k/v fused), named `diffusion_model.`
    + the BFL layer; and `<name>_turbo_lora_diffusers.safetensors`, the same LoRA in diffusers'
    naming (q/k/v split, the output modulation's halves in diffusers' order)."""
    generator = torch.Generator("cpu").manual_seed(seed)
    bfl: dict[str, torch.Tensor] = {}
    split: dict[str, torch.Tensor] = {}
    for key, weight in sorted(to_original(model.state_dict()).items()):
        layer = key.removesuffix(".weight")
        module = bfl_module(layer)
        if layer == key or weight.dim() != 2 or module is None:
            continue
        rows, columns = weight.shape
        down = torch.randn(RANK, columns, generator=generator) / columns**0.5
        up = torch.randn(rows, RANK, generator=generator) * 0.2 * TURBO_GAIN / RANK**0.5
        bfl[f"diffusion_model.{layer}{_DOWN}"] = down
        bfl[f"diffusion_model.{layer}{_UP}"] = up
        for target, part in _as_diffusers(layer, module, up):
            split[f"transformer.{target}{_DOWN}"] = down
            split[f"transformer.{target}{_UP}"] = part
    folder = out / "loras"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "turbo": folder / f"{name}_turbo_lora.safetensors",
        "turbo-diffusers": folder / f"{name}_turbo_lora_diffusers.safetensors",
    }
    for key, tensors in (("turbo", bfl), ("turbo-diffusers", split)):
        contiguous = {k: v.clone().contiguous() for k, v in tensors.items()}
        save_safetensors(contiguous, paths[key], {"format": "pt"})
    return paths


_DOWN, _UP = ".lora_A.weight", ".lora_B.weight"
_FUSED = {
    "to_q": ("to_q", "to_k", "to_v"),
    "add_q_proj": ("add_q_proj", "add_k_proj", "add_v_proj"),
}


def _as_diffusers(layer: str, module: str, up: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """A BFL layer's up matrix as diffusers' modules hold it: fused q/k/v one third each (the
    down shared), the output modulation's (shift, scale) rows as (scale, shift)."""
    head, _, last = module.rpartition(".")
    if last in _FUSED:
        return [(f"{head}.{m}", part) for m, part in zip(_FUSED[last], up.chunk(3), strict=True)]
    if layer == "final_layer.adaLN_modulation.1":
        shift, scale = up.chunk(2)
        return [(module, torch.cat([scale, shift]))]
    return [(module, up)]
