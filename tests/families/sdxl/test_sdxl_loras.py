"""kohya LoRAs on stability/sdxl, per request: the UNet half at `strength` and both text encoders
at `strength_clip` (ComfyUI LoraLoader's two strengths) render what diffusers renders after
`load_lora_weights` with the same weights per component (`set_adapters`); a file of another
naming, or a LoCon's convolutions, is refused naming why; the prompt memo keeps a prompt read
through a text-encoder LoRA apart from the same prompt read without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from sdxl_harness import kit_lora, max_diff, reference_pixels, render, sdxl_rig, take_pixels

from inline_core.diffusion.adapters.naming import read_layout
from inline_core.diffusion.files.header import read_header
from inline_core.errors import InvalidRequest
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.families.sdxl.lora_naming import SDXL_LORAS, kohya_module, unet_module
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255, as the plain parity's
EULER: dict[str, Any] = {"sampler": "euler", "schedule": "ddim_uniform"}


@pytest.fixture
def lora_reference(sdxl_reference: Any, sdxl_kit: SDXLKit) -> Iterator[Any]:
    """The reference pipeline with the kit's LoRA A loaded (and taken off again after)."""
    sdxl_reference.load_lora_weights(str(sdxl_kit.loras["a"]), adapter_name="a")
    try:
        yield sdxl_reference
    finally:
        sdxl_reference.unload_lora_weights()


def _euler(pipe: Any, steps: int) -> tuple[Any, float]:
    from diffusers import EulerDiscreteScheduler  # pyright: ignore[reportPrivateImportUsage]

    scheduler: Any = EulerDiscreteScheduler.from_config(pipe.scheduler.config)  # pyright: ignore
    scheduler.set_timesteps(steps)
    first = float(scheduler.sigmas[0])
    return scheduler, first / (1 + first * first) ** 0.5


@pytest.mark.parametrize(
    ("model", "clip"), [(1.0, None), (0.8, 0.5), (0.0, 1.0)], ids=["both", "apart", "clip-only"]
)
def test_kohya_lora_matches_load_lora_weights(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    lora_reference: Any,
    tmp_path: Path,
    model: float,
    clip: float | None,
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    lora = kit_lora(rig, sdxl_kit.loras["a"], model, clip)
    ours = take_pixels(render(rig, tmp_path, loras=[lora], model=sdxl_kit.checkpoint_name, **EULER))
    plain = take_pixels(render(rig, tmp_path, model=sdxl_kit.checkpoint_name, **EULER))
    text = model if clip is None else clip
    weights = {"unet": model, "text_encoder": text, "text_encoder_2": text}
    lora_reference.set_adapters(["a"], adapter_weights=[weights])
    scheduler, scale = _euler(lora_reference, 4)
    ref = reference_pixels(lora_reference, scheduler, latents_scale=scale, **EULER)
    assert max_diff(ours, ref) <= TOLERANCE
    assert max_diff(ours, plain) > 8  # the LoRA changes the picture


def test_the_prompt_memo_keeps_a_text_encoder_lora_apart(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    pipeline = rig.pipeline(sdxl_kit.checkpoint_name)
    encoder = pipeline.text_encoder
    use = kit_lora(rig, sdxl_kit.loras["a"]).use
    unet_only = kit_lora(rig, sdxl_kit.loras["b"]).use
    plain = encoder.encode_at("a red kite", -2).value.hidden
    adapted = encoder.encode_at("a red kite", -2, (use,)).value.hidden
    assert float((plain - adapted).abs().max()) > 1e-3
    # A LoRA with no text-encoder layers reads the prompt as no LoRA does: the memo's entry.
    assert encoder.adapting((unet_only,)) == ()
    again = encoder.encode_at("a red kite", -2, (unet_only,)).value.hidden
    assert again is plain
    assert torch.equal(encoder.encode_at("a red kite", -2, (use,)).value.hidden, adapted)


def test_kit_lora_reads_as_kohya_for_every_part(sdxl_kit: SDXLKit) -> None:
    layout = read_layout("a", read_header(sdxl_kit.loras["a"]), SDXL_LORAS)
    assert layout.naming == "kohya"
    parts = {m.split(".")[0] for m in layout.modules}
    assert parts == {"unet", "text_encoder", "text_encoder_2"}


@pytest.mark.parametrize(
    ("layer", "module"),
    [
        (
            "unet_input_blocks_4_1_transformer_blocks_1_attn2_to_out_0",
            "unet.down_blocks.1.attentions.0.transformer_blocks.1.attn2.to_out.0",
        ),
        ("unet_output_blocks_5_1_proj_out", "unet.up_blocks.1.attentions.2.proj_out"),
        (
            "unet_middle_block_1_transformer_blocks_0_ff_net_0_proj",
            "unet.mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj",
        ),
        (
            "unet_down_blocks_2_attentions_1_transformer_blocks_3_attn1_to_k",
            "unet.down_blocks.2.attentions.1.transformer_blocks.3.attn1.to_k",
        ),
        ("unet_label_emb_0_0", "unet.add_embedding.linear_1"),
        (
            "te2_text_model_encoder_layers_31_self_attn_out_proj",
            "text_encoder_2.text_model.encoder.layers.31.self_attn.out_proj",
        ),
    ],
)
def test_kohya_names_map_as_diffusers_converter_maps_them(layer: str, module: str) -> None:
    assert kohya_module(layer) == module


def test_a_locon_convolution_is_refused_naming_it() -> None:
    with pytest.raises(InvalidRequest, match="convolution 'input_blocks_1_0_in_layers_2'"):
        unet_module("input_blocks_1_0_in_layers_2")
    keys = ["lora_unet_input_blocks_1_0_in_layers_2.lora_down.weight"]
    keys.append("lora_unet_input_blocks_1_0_in_layers_2.lora_up.weight")
    with pytest.raises(InvalidRequest, match="LoCon"):
        read_layout("locon.safetensors", keys, SDXL_LORAS)


def test_another_models_lora_is_refused() -> None:
    keys = [f"lora_unet_blocks_0_self_attn_q.lora_{r}.weight" for r in ("down", "up")]
    with pytest.raises(InvalidRequest, match="not a layer of SDXL"):
        read_layout("wan.safetensors", keys, SDXL_LORAS)
