"""FLUX.2's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own FLUX.2 converter when they load).

- diffusers/PEFT: `transformer.transformer_blocks.0.attn.to_q.lora_A.weight`;
- BFL's naming as ComfyUI and ai-toolkit write it: `diffusion_model.double_blocks.0.img_attn.qkv
  .lora_A.weight` (fused q/k/v, split when it loads), `single_blocks.0.linear1`, ...

The layers are the blocks' attention and feed-forward projections: each sees one row per
request in a batched forward, so each row gets its own stack.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming

TARGET = re.compile(
    r"^(?:transformer_blocks\.\d+\.(?:attn\.(?:to_q|to_k|to_v|to_out\.0|add_q_proj|add_k_proj"
    r"|add_v_proj|to_add_out)|ff\.linear_(?:in|out)|ff_context\.linear_(?:in|out))"
    r"|single_transformer_blocks\.\d+\.attn\.(?:to_qkv_mlp_proj|to_out))$"
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


def _module(layer: str) -> str | None:
    return layer if TARGET.match(layer) else None


def _bfl_module(layer: str) -> str | None:
    if m := re.fullmatch(r"double_blocks\.(\d+)\.(.+)", layer):
        inner = _DOUBLE.get(m[2])
        return None if inner is None else f"transformer_blocks.{m[1]}.{inner}"
    if m := re.fullmatch(r"single_blocks\.(\d+)\.(.+)", layer):
        inner = _SINGLE.get(m[2])
        return None if inner is None else f"single_transformer_blocks.{m[1]}.{inner}"
    return None


FLUX2_LORAS = LoraNamings(
    "FLUX.2",
    (
        Naming("diffusers/PEFT", "transformer.", _module),
        Naming("BFL/ComfyUI", "diffusion_model.", _bfl_module),
    ),
)
