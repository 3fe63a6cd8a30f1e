"""Qwen-Image's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own Qwen-Image converter when they load).

- diffusers/PEFT: `transformer.transformer_blocks.0.attn.to_q.lora_A.weight`;
- ComfyUI and ai-toolkit: `diffusion_model.transformer_blocks.0.attn.to_q.lora_A.weight` (or
  `lora_down` / `lora_up` with an `alpha`);
- kohya / musubi-tuner: `lora_unet_transformer_blocks_0_attn_to_q.lora_down.weight`;
- Lightning (lightx2v's distilled LoRAs): the bare `transformer_blocks.0.attn.to_q.lora_down.weight`
  with an `alpha`.

Every linear layer of the transformer sees one row per request (its inputs are `(B, tokens, D)`
or `(B, D)`), so any of them may be adapted per row.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming

_BLOCK = r"transformer_blocks\.\d+"
TARGET = re.compile(
    rf"^(?:{_BLOCK}\.attn\.(?:to_q|to_k|to_v|to_out\.0|add_q_proj|add_k_proj|add_v_proj|to_add_out)"
    rf"|{_BLOCK}\.(?:img|txt)_mlp\.net\.(?:0\.proj|2)"
    rf"|{_BLOCK}\.(?:img|txt)_mod\.1"
    r"|img_in|txt_in|proj_out|norm_out\.linear"
    r"|time_text_embed\.timestep_embedder\.linear_[12])$"
)
# kohya joins a module path with underscores; these names keep theirs.
_UNDERSCORED = (
    "transformer_blocks",
    "to_add_out",
    "add_q_proj",
    "add_k_proj",
    "add_v_proj",
    "to_q",
    "to_k",
    "to_v",
    "to_out",
    "img_mlp",
    "txt_mlp",
    "img_mod",
    "txt_mod",
    "img_in",
    "txt_in",
    "proj_out",
    "norm_out",
    "time_text_embed",
    "timestep_embedder",
    "linear_1",
    "linear_2",
)


def _module(layer: str) -> str | None:
    return layer if TARGET.match(layer) else None


def _bare_module(layer: str) -> str | None:
    return _module("transformer_blocks." + layer)


def _kohya_module(layer: str) -> str | None:
    dotted = layer.replace("_", ".")
    for name in _UNDERSCORED:
        dotted = dotted.replace(name.replace("_", "."), name)
    return _module(dotted)


QWEN_IMAGE_LORAS = LoraNamings(
    "Qwen-Image",
    (
        Naming("diffusers/PEFT", "transformer.", _module),
        Naming("ComfyUI/ai-toolkit", "diffusion_model.", _module),
        Naming("kohya/musubi-tuner", "lora_unet_", _kohya_module),
        Naming("Lightning", "transformer_blocks.", _bare_module),
    ),
)
