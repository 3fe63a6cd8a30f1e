"""Wan's LoRA namings read from tensor names alone (what submit checks, torch-free): the diffusers,
ComfyUI/ai-toolkit and musubi-tuner spellings map onto the same diffusers modules, and a file of
another model, of no known naming, or holding weight differences is refused naming the file."""

from __future__ import annotations

import pytest

from inline_core.diffusion.adapters.naming import read_layout
from inline_core.errors import InvalidRequest
from inline_core.families.wan.lora_naming import WAN_LORAS, from_original, to_original

MODULES = (
    "blocks.0.attn1.to_q",
    "blocks.0.attn1.to_out.0",
    "blocks.1.attn2.to_k",
    "blocks.1.attn2.add_v_proj",
    "blocks.3.ffn.net.0.proj",
    "blocks.3.ffn.net.2",
)
OUTER = ("condition_embedder.time_proj", "condition_embedder.text_embedder.linear_1", "proj_out")


def keys(names: list[str], down: str, up: str, alpha: bool) -> list[str]:
    out: list[str] = []
    for n in names:
        out += [f"{n}{down}", f"{n}{up}"] + ([f"{n}.alpha"] if alpha else [])
    return out


PEFT = (".lora_A.weight", ".lora_B.weight")
KOHYA = (".lora_down.weight", ".lora_up.weight")


@pytest.mark.parametrize(
    ("naming", "names", "modules"),
    [
        (
            "diffusers/PEFT",
            keys([f"transformer.{m}" for m in MODULES + OUTER], *PEFT, False),
            MODULES + OUTER,
        ),
        (
            "ComfyUI/ai-toolkit",
            keys([f"diffusion_model.{to_original(m)}" for m in MODULES + OUTER], *KOHYA, True),
            MODULES + OUTER,
        ),
        (
            "ComfyUI/ai-toolkit",
            keys([f"diffusion_model.{to_original(m)}" for m in MODULES], *PEFT, False),
            MODULES,
        ),
        (
            "kohya/musubi-tuner",
            keys([f"lora_unet_{to_original(m).replace('.', '_')}" for m in MODULES], *KOHYA, True),
            MODULES,
        ),
    ],
)
def test_every_naming_maps_onto_the_same_modules(
    naming: str, names: list[str], modules: tuple[str, ...]
) -> None:
    layout = read_layout("motion.safetensors", names, WAN_LORAS)
    assert layout.naming == naming
    assert sorted(layout.modules) == sorted(modules)


def test_the_wan_repositorys_names_are_diffusers_modules() -> None:
    assert to_original("blocks.2.attn2.add_k_proj") == "blocks.2.cross_attn.k_img"
    assert from_original("blocks.2.self_attn.o") == "blocks.2.attn1.to_out.0"
    assert from_original("head.head") == "proj_out"
    assert from_original("blocks.2.norm3") is None
    for module in MODULES + OUTER:
        assert from_original(to_original(module)) == module


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            keys(["transformer.layers.0.attention.to_q"], *PEFT, False),
            r"adapts 'transformer.layers.0.attention.to_q'.*another model",
        ),
        (
            keys(["diffusion_model.double_blocks.0.img_attn.qkv"], *KOHYA, True),
            r"not a layer of Wan's transformer that LoRAs may adapt",
        ),
        (
            keys(["lora_te1_text_model_encoder_layers_0_mlp_fc1"], *KOHYA, True),
            r"matches no known LoRA naming",
        ),
        (
            [
                *keys(["diffusion_model.blocks.0.self_attn.q"], *PEFT, False),
                "diffusion_model.blocks.0.self_attn.q.diff_b",
            ],
            r"weight or bias differences such as .*diff_b",
        ),
    ],
)
def test_refusals_name_the_file_and_what_was_expected(names: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as refused:
        read_layout("other.safetensors", names, WAN_LORAS)
    assert "loras/other.safetensors" in refused.value.message
    assert "a Wan LoRA in one of the namings" in refused.value.message
