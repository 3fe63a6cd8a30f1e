"""Z-Image's LoRA namings read from tensor names alone (what submit checks, torch-free): each
trainer's spelling maps onto the same modules, and a file of another model or of no known naming
is refused naming the file and what was expected."""

from __future__ import annotations

import pytest

from inline_core.diffusion.adapters.naming import read_layout
from inline_core.errors import InvalidRequest
from inline_core.families.zimage.lora_naming import ZIMAGE_LORAS

MODULES = (
    "layers.0.attention.to_out.0",
    "layers.0.attention.to_q",
    "layers.1.adaLN_modulation.0",
    "noise_refiner.1.feed_forward.w2",
)


def keys(prefix: str, modules: tuple[str, ...], down: str, up: str, alpha: bool) -> list[str]:
    out: list[str] = []
    for m in modules:
        out += [f"{prefix}{m}{down}", f"{prefix}{m}{up}"] + (
            [f"{prefix}{m}.alpha"] if alpha else []
        )
    return out


def kohya(module: str) -> str:
    return module.replace(".", "_")


@pytest.mark.parametrize(
    ("naming", "names"),
    [
        (
            "diffusers/PEFT",
            keys("transformer.", MODULES, ".lora_A.weight", ".lora_B.weight", False),
        ),
        (
            "ai-toolkit/ComfyUI",
            keys("diffusion_model.", MODULES, ".lora_down.weight", ".lora_up.weight", True),
        ),
        (
            "kohya",
            keys(
                "lora_unet_",
                tuple(kohya(m) for m in MODULES),
                ".lora_down.weight",
                ".lora_up.weight",
                True,
            ),
        ),
    ],
)
def test_every_naming_maps_onto_the_same_modules(naming: str, names: list[str]) -> None:
    layout = read_layout("style.safetensors", names, ZIMAGE_LORAS)
    assert layout.naming == naming
    assert sorted(layout.modules) == sorted(MODULES)


def test_comfyuis_attention_out_is_to_out_0() -> None:
    names = keys(
        "diffusion_model.",
        ("layers.3.attention.out",),
        ".lora_down.weight",
        ".lora_up.weight",
        True,
    )
    assert read_layout("x.safetensors", names, ZIMAGE_LORAS).modules == (
        "layers.3.attention.to_out.0",
    )


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            keys(
                "transformer.",
                ("transformer_blocks.0.attn.to_q",),
                ".lora_A.weight",
                ".lora_B.weight",
                False,
            ),
            r"adapts 'transformer.transformer_blocks.0.attn.to_q'.*another model",
        ),
        (
            keys(
                "lora_te1_",
                ("text_model_encoder_layers_0_mlp_fc1",),
                ".lora_down.weight",
                ".lora_up.weight",
                True,
            ),
            r"matches no known LoRA naming",
        ),
        (
            keys("transformer.", ("cap_embedder.1",), ".lora_A.weight", ".lora_B.weight", False),
            r"not a layer of Z-Image's transformer that LoRAs may adapt",
        ),
        (["transformer.layers.0.attention.to_q.lora_A.weight"], r"has no up \(B\) matrix"),
        (["model.diffusion_model.input_blocks.0.weight"], r"not LoRA's"),
        ([], r"has no tensors"),
    ],
)
def test_refusals_name_the_file_and_what_was_expected(names: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as refused:
        read_layout("other.safetensors", names, ZIMAGE_LORAS)
    assert "loras/other.safetensors" in refused.value.message
