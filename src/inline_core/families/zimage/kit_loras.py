"""The tiny kit's LoRAs: two different adapters of the tiny transformer, `A` in every naming
Z-Image takes (they hold the same weights, so they render the same pixels) and `B` on other
layers, written into `loras/`."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from inline_core.diffusion.adapters.kit import (
    KitLora,
    Naming,
    random_lora,
    write_lora,
    write_namings,
)

RANK = 4
# A adapts the attention of every block; B the feed-forward and modulation of the main layers.
_ATTENTION = ("to_q", "to_k", "to_v", "to_out.0")


def lora_a_modules(model: nn.Module) -> list[str]:
    return [
        f"{block}.{i}.attention.{proj}"
        for block in ("layers", "noise_refiner", "context_refiner")
        for i in range(_blocks(model, block))
        for proj in _ATTENTION
    ]


def lora_b_modules(model: nn.Module) -> list[str]:
    return [
        f"layers.{i}.{proj}"
        for i in range(_blocks(model, "layers"))
        for proj in ("feed_forward.w1", "feed_forward.w2", "feed_forward.w3", "adaLN_modulation.0")
    ]


def _blocks(model: nn.Module, name: str) -> int:
    blocks = model.get_submodule(name)
    assert isinstance(blocks, nn.ModuleList)
    return len(blocks)


def _kohya(module: str) -> str:
    return "lora_unet_" + module.replace(".", "_")


_PEFT_DOWN, _PEFT_UP = ".lora_A.weight", ".lora_B.weight"
# A's namings: the same weights in every naming Z-Image takes.
_NAMINGS = (
    Naming("a", "", "transformer.".__add__, _PEFT_DOWN, _PEFT_UP, peft_alpha=8.0),
    Naming("a-ai-toolkit", "_aitoolkit", "diffusion_model.".__add__, _PEFT_DOWN, _PEFT_UP),
    Naming("a-kohya", "_kohya", _kohya, ".lora_down.weight", ".lora_up.weight", alpha=2.0),
)


def write_kit_loras(out: Path, name: str, model: nn.Module) -> dict[str, Path]:
    """`loras/<name>_lora_a*.safetensors` (one per naming) and `<name>_lora_b.safetensors`."""
    a: KitLora = random_lora(model, lora_a_modules(model), RANK, seed=11)
    b: KitLora = random_lora(model, lora_b_modules(model), RANK, seed=12)
    folder = out / "loras"
    b_file = folder / f"{name}_lora_b.safetensors"
    return {
        **write_namings(a, folder, f"{name}_lora_a", _NAMINGS),
        "b": write_lora(b, b_file, "transformer.".__add__, down=_PEFT_DOWN, up=_PEFT_UP),
    }
