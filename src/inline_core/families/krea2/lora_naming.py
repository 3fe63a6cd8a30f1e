"""Krea 2's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own Krea 2 converter when they load).

- diffusers/PEFT: `transformer.transformer_blocks.0.attn.to_q.lora_A.weight`;
- Krea's naming as its reference trainer and ComfyUI write it: `diffusion_model.blocks.0.attn.wq
  .lora_A.weight`, `txtfusion.refiner_blocks.0.mlp.up`, `first`, `last.linear`, ...;
- ai-toolkit's: the same names under `base_model.model.`.

Every layer sees one row per request in a batched forward, so each row gets its own stack.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming
from inline_core.families.krea2.formats import diffusers_key

_BLOCK = r"(?:attn\.(?:to_q|to_k|to_v|to_out\.0|to_gate)|ff\.(?:gate|up|down))"
TARGET = re.compile(
    rf"^(?:transformer_blocks\.\d+\.{_BLOCK}"
    rf"|text_fusion\.(?:layerwise|refiner)_blocks\.\d+\.{_BLOCK}"
    r"|img_in|final_layer\.linear|time_embed\.linear_[12]|time_mod_proj|txt_in\.linear_[12]"
    r"|text_fusion\.projector)$"
)
# Krea's standalone modules in ai-toolkit's `nn.Sequential` names, beside the converter's.
_STANDALONE = {"first": "img_in", "last.linear": "final_layer.linear"}


def _module(layer: str) -> str | None:
    return layer if TARGET.match(layer) else None


def _krea_module(layer: str) -> str | None:
    # The converter's renames match whole names: end the layer's name as a key's prefix ends.
    return _module(_STANDALONE.get(layer) or diffusers_key(layer + ".").removesuffix("."))


KREA2_LORAS = LoraNamings(
    "Krea 2",
    (
        Naming("diffusers/PEFT", "transformer.", _module),
        Naming("Krea/ComfyUI", "diffusion_model.", _krea_module),
        Naming("ai-toolkit", "base_model.model.", _krea_module),
    ),
)
