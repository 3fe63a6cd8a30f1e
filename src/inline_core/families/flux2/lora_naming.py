"""FLUX.2's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own FLUX.2 converter when they load).

- diffusers/PEFT: `transformer.transformer_blocks.0.attn.to_q.lora_A.weight`;
- BFL's naming as ComfyUI and ai-toolkit write it: `diffusion_model.double_blocks.0.img_attn.qkv
  .lora_A.weight` (fused q/k/v, split when it loads), `single_blocks.0.linear1`, ...

The layers are the blocks' attention and feed-forward projections, and the linears around the
blocks that distillation LoRAs (the Turbo LoRA of ComfyUI's dev templates) also train: the input
embedders, the timestep and guidance embedders, the shared modulations and the output layer,
each of which diffusers' converter names. Every one of them sees one row per request in a batched
forward (tokens, or a row's time embedding), so each row gets its own stack.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming

TARGET = re.compile(
    r"^(?:transformer_blocks\.\d+\.(?:attn\.(?:to_q|to_k|to_v|to_out\.0|add_q_proj|add_k_proj"
    r"|add_v_proj|to_add_out)|ff\.linear_(?:in|out)|ff_context\.linear_(?:in|out))"
    r"|single_transformer_blocks\.\d+\.attn\.(?:to_qkv_mlp_proj|to_out)"
    r"|x_embedder|context_embedder|proj_out|norm_out\.linear"
    r"|time_guidance_embed\.(?:timestep|guidance)_embedder\.linear_[12]"
    r"|(?:double_stream_modulation_(?:img|txt)|single_stream_modulation)\.linear)$"
)
_DOUBLE = {
    "img_attn.qkv": "attn.to_q",  # fused: split into to_q, to_k, to_v when it loads
    "img_attn.proj": "attn.to_out.0",
    "img_mlp.0": "ff.linear_in",
    "img_mlp.2": "ff.linear_out",
    "txt_attn.qkv": "attn.add_q_proj",
    "txt_attn.proj": "attn.to_add_out",
    "txt_mlp.0": "ff_context.linear_in",
    "txt_mlp.2": "ff_context.linear_out",
}
_SINGLE = {"linear1": "attn.to_qkv_mlp_proj", "linear2": "attn.to_out"}
# BFL's layers outside the blocks (diffusers' converter's names for them).
_OUTSIDE = {
    "img_in": "x_embedder",
    "txt_in": "context_embedder",
    "time_in.in_layer": "time_guidance_embed.timestep_embedder.linear_1",
    "time_in.out_layer": "time_guidance_embed.timestep_embedder.linear_2",
    "guidance_in.in_layer": "time_guidance_embed.guidance_embedder.linear_1",
    "guidance_in.out_layer": "time_guidance_embed.guidance_embedder.linear_2",
    "final_layer.linear": "proj_out",
    "final_layer.adaLN_modulation.1": "norm_out.linear",
    "single_stream_modulation.lin": "single_stream_modulation.linear",
    "double_stream_modulation_img.lin": "double_stream_modulation_img.linear",
    "double_stream_modulation_txt.lin": "double_stream_modulation_txt.linear",
}


def _module(layer: str) -> str | None:
    return layer if TARGET.match(layer) else None


def bfl_module(layer: str) -> str | None:
    """The model's module a BFL-named layer (without `diffusion_model.`) adapts, or None."""
    if m := re.fullmatch(r"double_blocks\.(\d+)\.(.+)", layer):
        inner = _DOUBLE.get(m[2])
        return None if inner is None else f"transformer_blocks.{m[1]}.{inner}"
    if m := re.fullmatch(r"single_blocks\.(\d+)\.(.+)", layer):
        inner = _SINGLE.get(m[2])
        return None if inner is None else f"single_transformer_blocks.{m[1]}.{inner}"
    return _OUTSIDE.get(layer)


BFL_NAMING = "BFL/ComfyUI"
FLUX2_LORAS = LoraNamings(
    "FLUX.2",
    (
        Naming("diffusers/PEFT", "transformer.", _module),
        Naming(BFL_NAMING, "diffusion_model.", bfl_module),
    ),
)
