"""Wan's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own Wan converters when they load).

- diffusers/PEFT: `transformer.blocks.0.attn1.to_q.lora_A.weight`;
- ComfyUI and ai-toolkit: the Wan repository's own module names,
  `diffusion_model.blocks.0.self_attn.q.lora_down.weight` with an `alpha` (or `lora_A` /
  `lora_B`), converted by `_convert_non_diffusers_wan_lora_to_diffusers`;
- kohya (musubi-tuner): `lora_unet_blocks_0_self_attn_q.lora_down.weight` with an `alpha`,
  converted by `_convert_musubi_wan_lora_to_diffusers` (blocks only, as that converter reads).

Every linear layer of Wan's transformer sees one batched tensor with the requests along its
first axis (TI2V's per-token timesteps are unflattened before the time embedder), so each may be
adapted per row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from inline_core.diffusion.adapters.naming import LoraNamings, Naming

# A block's layers: the Wan repository's name -> diffusers' module name (after `blocks.N.`).
BLOCK_LAYERS: Mapping[str, str] = {
    "self_attn.q": "attn1.to_q",
    "self_attn.k": "attn1.to_k",
    "self_attn.v": "attn1.to_v",
    "self_attn.o": "attn1.to_out.0",
    "cross_attn.q": "attn2.to_q",
    "cross_attn.k": "attn2.to_k",
    "cross_attn.v": "attn2.to_v",
    "cross_attn.o": "attn2.to_out.0",
    "cross_attn.k_img": "attn2.add_k_proj",
    "cross_attn.v_img": "attn2.add_v_proj",
    "ffn.0": "ffn.net.0.proj",
    "ffn.2": "ffn.net.2",
}
# The layers outside the blocks, the same way round.
OUTER_LAYERS: Mapping[str, str] = {
    "time_embedding.0": "condition_embedder.time_embedder.linear_1",
    "time_embedding.2": "condition_embedder.time_embedder.linear_2",
    "time_projection.1": "condition_embedder.time_proj",
    "text_embedding.0": "condition_embedder.text_embedder.linear_1",
    "text_embedding.2": "condition_embedder.text_embedder.linear_2",
    "img_emb.proj.1": "condition_embedder.image_embedder.ff.net.0.proj",
    "img_emb.proj.3": "condition_embedder.image_embedder.ff.net.2",
    "head.head": "proj_out",
}
_BLOCK = re.compile(r"^blocks\.(\d+)\.(.+)$")
_KOHYA_BLOCK = re.compile(r"^blocks_(\d+)_(.+)$")
_DIFFUSERS_BLOCK = frozenset(BLOCK_LAYERS.values())
_DIFFUSERS_OUTER = frozenset(OUTER_LAYERS.values())
_KOHYA_LAYERS = {name.replace(".", "_"): name for name in BLOCK_LAYERS}


def _diffusers(layer: str) -> str | None:
    block = _BLOCK.match(layer)
    if block is not None:
        return layer if block.group(2) in _DIFFUSERS_BLOCK else None
    return layer if layer in _DIFFUSERS_OUTER else None


def from_original(layer: str) -> str | None:
    """A layer in the Wan repository's naming as diffusers' module (None: not adaptable)."""
    block = _BLOCK.match(layer)
    if block is None:
        return OUTER_LAYERS.get(layer)
    inner = BLOCK_LAYERS.get(block.group(2))
    return None if inner is None else f"blocks.{block.group(1)}.{inner}"


def to_original(module: str) -> str:
    """diffusers' module name in the Wan repository's naming (the kit writes files this way)."""
    block = _BLOCK.match(module)
    if block is None:
        return next(k for k, v in OUTER_LAYERS.items() if v == module)
    inner = next(k for k, v in BLOCK_LAYERS.items() if v == block.group(2))
    return f"blocks.{block.group(1)}.{inner}"


def _kohya(layer: str) -> str | None:
    block = _KOHYA_BLOCK.match(layer)
    inner = None if block is None else _KOHYA_LAYERS.get(block.group(2))
    return None if block is None or inner is None else from_original(f"blocks.{block[1]}.{inner}")


WAN_LORAS = LoraNamings(
    "Wan",
    (
        Naming("diffusers/PEFT", "transformer.", _diffusers),
        Naming("ComfyUI/ai-toolkit", "diffusion_model.", from_original),
        Naming("kohya/musubi-tuner", "lora_unet_", _kohya),
    ),
)
