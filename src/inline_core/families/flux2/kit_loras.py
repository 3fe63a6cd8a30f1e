"""The tiny kit's LoRAs: `A` on the blocks' attention (diffusers/PEFT naming) and `B` on their
feed-forwards, in diffusers/PEFT naming and in BFL's as ComfyUI and ai-toolkit write it (the same
weights, so they render the same pixels), written into `loras/`."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from inline_core.diffusion.adapters.kit import KitLora, random_lora, write_lora

RANK = 4
GAIN = 20.0
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
