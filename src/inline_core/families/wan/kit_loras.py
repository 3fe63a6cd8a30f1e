"""The tiny kit's Wan LoRAs: two different adapters of the tiny Wan 2.1 transformer, `A` in every
naming Wan takes (they hold the same weights, so they render the same frames) and `B` on other
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
from inline_core.families.wan.lora_naming import to_original

RANK = 4
# A adapts every block's self- and cross-attention and feed-forward (all that musubi-tuner's
# naming holds, and its converter needs every one); B the condition embedder and the output.
_ATTENTION = ("to_q", "to_k", "to_v", "to_out.0")
_B_MODULES = (
    "condition_embedder.time_embedder.linear_1",
    "condition_embedder.time_proj",
    "condition_embedder.text_embedder.linear_2",
    "proj_out",
)
LORA_DOWN, LORA_UP = ".lora_A.weight", ".lora_B.weight"
KOHYA_DOWN, KOHYA_UP = ".lora_down.weight", ".lora_up.weight"


def lora_a_modules(model: nn.Module) -> list[str]:
    blocks = model.get_submodule("blocks")
    assert isinstance(blocks, nn.ModuleList)
    return [
        f"blocks.{i}.{layer}"
        for i in range(len(blocks))
        for layer in (
            *(f"{attn}.{proj}" for attn in ("attn1", "attn2") for proj in _ATTENTION),
            "ffn.net.0.proj",
            "ffn.net.2",
        )
    ]


def _comfy(module: str) -> str:
    return "diffusion_model." + to_original(module)


def _kohya(module: str) -> str:
    return "lora_unet_" + to_original(module).replace(".", "_")


# A's namings: the same weights in every naming Wan takes.
_NAMINGS = (
    Naming("a", "", "transformer.".__add__, LORA_DOWN, LORA_UP, peft_alpha=8.0),
    Naming("a-comfy", "_comfy", _comfy, KOHYA_DOWN, KOHYA_UP, alpha=2.0),
    Naming("a-ai-toolkit", "_aitoolkit", _comfy, LORA_DOWN, LORA_UP),
    Naming("a-kohya", "_kohya", _kohya, KOHYA_DOWN, KOHYA_UP, alpha=2.0),
)


def write_kit_loras(out: Path, name: str, model: nn.Module) -> dict[str, Path]:
    """`loras/<name>_lora_a*.safetensors` (one per naming) and `<name>_lora_b.safetensors`."""
    a: KitLora = random_lora(model, lora_a_modules(model), RANK, seed=31)
    b: KitLora = random_lora(model, _B_MODULES, RANK, seed=32)
    folder = out / "loras"
    written = write_namings(a, folder, f"{name}_lora_a", _NAMINGS)
    diffusers = "transformer.".__add__
    b_file = folder / f"{name}_lora_b.safetensors"
    written["b"] = write_lora(b, b_file, diffusers, down=LORA_DOWN, up=LORA_UP)
    return written
