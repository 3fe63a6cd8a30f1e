"""The tiny kit's Qwen-Image LoRAs: `A` in every naming Qwen-Image takes (the same weights, so
they render the same pixels) and `B` on other layers, written into `loras/`."""

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
_BLOCK_LAYERS = (
    "attn.to_q",
    "attn.to_k",
    "attn.to_v",
    "attn.to_out.0",
    "attn.add_q_proj",
    "attn.add_k_proj",
    "attn.add_v_proj",
    "attn.to_add_out",
    "img_mlp.net.2",
    "txt_mlp.net.0.proj",
)
_B_MODULES = ("img_in", "txt_in", "proj_out", "time_text_embed.timestep_embedder.linear_1")
LORA_DOWN, LORA_UP = ".lora_A.weight", ".lora_B.weight"
KOHYA_DOWN, KOHYA_UP = ".lora_down.weight", ".lora_up.weight"


def lora_a_modules(model: nn.Module) -> list[str]:
    blocks = model.get_submodule("transformer_blocks")
    assert isinstance(blocks, nn.ModuleList)
    return [
        f"transformer_blocks.{i}.{layer}" for i in range(len(blocks)) for layer in _BLOCK_LAYERS
    ]


def _kohya(module: str) -> str:
    return "lora_unet_" + module.replace(".", "_")


# A's namings: the same weights in every naming Qwen-Image takes.
_NAMINGS = (
    Naming("a", "", "transformer.".__add__, LORA_DOWN, LORA_UP, peft_alpha=8.0),
    Naming("a-comfy", "_comfy", "diffusion_model.".__add__, KOHYA_DOWN, KOHYA_UP, alpha=2.0),
    Naming("a-kohya", "_kohya", _kohya, KOHYA_DOWN, KOHYA_UP, alpha=2.0),
    Naming("a-lightning", "_lightning", str, KOHYA_DOWN, KOHYA_UP, alpha=4.0),
)


def write_kit_loras(out: Path, name: str, model: nn.Module) -> dict[str, Path]:
    """`loras/<name>_lora_a*.safetensors` (one per naming) and `<name>_lora_b.safetensors`."""
    a: KitLora = random_lora(model, lora_a_modules(model), RANK, seed=41)
    b: KitLora = random_lora(model, _B_MODULES, RANK, seed=42)
    folder = out / "loras"
    written = write_namings(a, folder, f"{name}_lora_a", _NAMINGS)
    b_file = folder / f"{name}_lora_b.safetensors"
    written["b"] = write_lora(b, b_file, "transformer.".__add__, down=LORA_DOWN, up=LORA_UP)
    return written
