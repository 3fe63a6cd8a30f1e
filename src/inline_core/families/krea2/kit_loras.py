"""The tiny kit's LoRAs: `A` on the blocks' attention (diffusers/PEFT naming) and `B` on their
feed-forwards and the text fusion's, in diffusers/PEFT naming and in Krea's as ComfyUI writes it
(the same weights, so they render the same pixels), written into `loras/`."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from inline_core.diffusion.adapters.kit import KitLora, random_lora, write_lora
from inline_core.families.krea2.formats import krea_key

RANK = 4
GAIN = 20.0
_ATTENTION = ("to_q", "to_k", "to_v", "to_out.0", "to_gate")
_FEED_FORWARD = ("ff.gate", "ff.up", "ff.down")


def _count(model: nn.Module, name: str) -> int:
    blocks = model.get_submodule(name)
    assert isinstance(blocks, nn.ModuleList)
    return len(blocks)


def lora_a_modules(model: nn.Module) -> list[str]:
    return [
        f"transformer_blocks.{i}.attn.{p}"
        for i in range(_count(model, "transformer_blocks"))
        for p in _ATTENTION
    ]


def lora_b_modules(model: nn.Module) -> list[str]:
    blocks = [
        f"{name}.{i}"
        for name in ("transformer_blocks", "text_fusion.refiner_blocks")
        for i in range(_count(model, name))
    ]
    return [f"{block}.{layer}" for block in blocks for layer in _FEED_FORWARD]


def _krea(module: str) -> str:
    """A module's name in Krea's naming (as its weight's key is renamed)."""
    return "diffusion_model." + krea_key(f"{module}.weight").removesuffix(".weight")


def _strong(lora: KitLora) -> KitLora:
    """The tiny model's picture barely moves under a LoRA of the usual size: make it visible."""
    return KitLora(lora.rank, {k: (d, u * GAIN) for k, (d, u) in lora.pairs.items()})


def write_kit_loras(out: Path, name: str, model: nn.Module) -> dict[str, Path]:
    a = _strong(random_lora(model, lora_a_modules(model), RANK, seed=51))
    b = _strong(random_lora(model, lora_b_modules(model), RANK, seed=52))
    folder = out / "loras"
    pa, pb = ".lora_A.weight", ".lora_B.weight"
    peft = "transformer.".__add__
    return {
        "a": write_lora(a, folder / f"{name}_lora_a.safetensors", peft, down=pa, up=pb),
        "b": write_lora(b, folder / f"{name}_lora_b.safetensors", peft, down=pa, up=pb),
        "b-krea": write_lora(b, folder / f"{name}_lora_b_krea.safetensors", _krea, down=pa, up=pb),
    }
