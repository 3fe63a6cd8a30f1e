"""SDXL's LoRA naming: kohya's, as sd-scripts trains SDXL and ComfyUI's LoraLoader reads it
(torch-free; the submit check and the torch-side reader share these names).

One file adapts up to three models: `lora_unet_*` the UNet (in the original block naming,
`input_blocks_4_1_transformer_blocks_0_attn1_to_q`, or diffusers' `down_blocks_1_attentions_0_...`
that older scripts wrote), `lora_te1_*` CLIP-L and `lora_te2_*` OpenCLIP-G (transformers' names,
`text_model_encoder_layers_0_self_attn_q_proj`). Each tensor is `<layer>.lora_down.weight`,
`.lora_up.weight` and a scalar `.alpha` (the pair is scaled by `alpha / rank`).

Adapted are the linear layers whose input has one row per request in a batched forward: every
transformer block's attention, feed-forward and projections, the resnets' timestep projections
and the timestep and size embeddings. The convolutions a LoCon file adds are not (they would need
a per-row convolution): such a file is refused naming the layer.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming
from inline_core.errors import InvalidRequest

PREFIX = "lora_"
# The models of a stack a kohya file adapts, by its layer prefix, under their part names.
UNET, TEXT_ENCODER, TEXT_ENCODER_2 = "unet", "text_encoder", "text_encoder_2"
COMPONENTS = {"unet_": UNET, "te1_": TEXT_ENCODER, "te2_": TEXT_ENCODER_2}
SDXL_LAYERS_PER_BLOCK = 2  # every SDXL UNet's (base and community): the submit check's

# Inside a transformer model (`Transformer2DModel`): kohya's underscored name -> diffusers'.
_INNER = re.compile(
    r"(?P<proj>proj_in|proj_out)"
    r"|transformer_blocks_(?P<block>\d+)_(?:(?P<attn>attn[12])_(?P<qkv>to_q|to_k|to_v|to_out_0)"
    r"|ff_net_(?P<ff>0_proj|2))"
)
_TOP = {
    "time_embed_0": "time_embedding.linear_1",
    "time_embed_2": "time_embedding.linear_2",
    "label_emb_0_0": "add_embedding.linear_1",
    "label_emb_0_2": "add_embedding.linear_2",
    "time_embedding_linear_1": "time_embedding.linear_1",
    "time_embedding_linear_2": "time_embedding.linear_2",
    "add_embedding_linear_1": "add_embedding.linear_1",
    "add_embedding_linear_2": "add_embedding.linear_2",
}
_TEXT = re.compile(r"text_model_encoder_layers_(\d+)_(?:self_attn_(q|k|v|out)_proj|mlp_(fc1|fc2))")
_EMB, _TIME_PROJ = "emb_layers_1", "time_emb_proj"  # a resnet's timestep projection
_CONV = re.compile(r"(in_layers_2|out_layers_3|skip_connection|_op|_conv|input_blocks_0_0|out_2)$")


def _inner(rest: str) -> str | None:
    m = _INNER.fullmatch(rest)
    if m is None:
        return None
    if m["proj"]:
        return m["proj"]
    if m["attn"]:
        return f"transformer_blocks.{m['block']}.{m['attn']}.{m['qkv'].replace('out_0', 'out.0')}"
    return f"transformer_blocks.{m['block']}.ff.net.{m['ff'].replace('_', '.')}"


def _original(layer: str, per: int) -> str | None:
    """A layer in the original block naming (SDXL's kohya files)."""
    if m := re.fullmatch(r"(input_blocks|output_blocks)_(\d+)_(0|1)_(.+)", layer):
        index = int(m[2]) - (1 if m[1] == "input_blocks" else 0)
        if index < 0:
            return None
        level, slot = divmod(index, per + 1)
        blocks = "down_blocks" if m[1] == "input_blocks" else "up_blocks"
        if m[3] == "0":
            return (
                f"{blocks}.{level}.resnets.{slot}.time_emb_proj" if m[4] == "emb_layers_1" else None
            )
        inner = _inner(m[4])
        return None if inner is None else f"{blocks}.{level}.attentions.{slot}.{inner}"
    if m := re.fullmatch(r"middle_block_(\d)_(.+)", layer):
        if m[1] in "02":
            return (
                f"mid_block.resnets.{int(m[1]) // 2}.time_emb_proj"
                if m[2] == "emb_layers_1"
                else None
            )
        inner = _inner(m[2]) if m[1] == "1" else None
        return None if inner is None else f"mid_block.attentions.0.{inner}"
    return None


def _diffusers(layer: str) -> str | None:
    """A layer in diffusers' block naming (older kohya scripts' SDXL files)."""
    if m := re.fullmatch(r"(down_blocks|up_blocks)_(\d+)_(attentions|resnets)_(\d+)_(.+)", layer):
        if m[3] == "resnets":
            ok = m[5] == "time_emb_proj"
            return f"{m[1]}.{m[2]}.resnets.{m[4]}.time_emb_proj" if ok else None
        inner = _inner(m[5])
        return None if inner is None else f"{m[1]}.{m[2]}.attentions.{m[4]}.{inner}"
    if m := re.fullmatch(r"mid_block_(attentions|resnets)_(\d+)_(.+)", layer):
        if m[1] == "resnets":
            return f"mid_block.resnets.{m[2]}.time_emb_proj" if m[3] == "time_emb_proj" else None
        inner = _inner(m[3])
        return None if inner is None else f"mid_block.attentions.{m[2]}.{inner}"
    return None


def unet_module(layer: str, per: int = SDXL_LAYERS_PER_BLOCK) -> str | None:
    """The diffusers UNet module of a kohya UNet layer (after `lora_unet_`), for a UNet with
    `per` resnets per level; None: not a layer SDXL's LoRAs adapt."""
    if layer in _TOP:
        return _TOP[layer]
    found = _original(layer, per) or _diffusers(layer)
    if found is None and _CONV.search(layer):
        raise InvalidRequest(
            f"the LoRA adapts the UNet's convolution {layer!r} (a LoCon / LyCORIS file): SDXL "
            "applies LoRAs per request on linear layers only (attention, feed-forward, "
            "projections)"
        )
    return found


def text_module(layer: str) -> str | None:
    """transformers' CLIP module of a kohya text encoder layer (after `lora_te1_`/`lora_te2_`)."""
    m = _TEXT.fullmatch(layer)
    if m is None:
        return None
    what = f"self_attn.{m[2]}_proj" if m[2] else f"mlp.{m[3]}"
    return f"text_model.encoder.layers.{m[1]}.{what}"


def split_layer(layer: str) -> tuple[str, str] | None:
    """(part, its layer name) of a kohya layer after `lora_`; None: no SDXL model's prefix."""
    for prefix, part in COMPONENTS.items():
        if layer.startswith(prefix):
            return part, layer[len(prefix) :]
    return None


def kohya_module(layer: str, per: int = SDXL_LAYERS_PER_BLOCK) -> str | None:
    """`<part>.<module>` of a kohya layer after `lora_` (None: not one SDXL's LoRAs adapt)."""
    split = split_layer(layer)
    if split is None:
        return None
    part, rest = split
    module = unet_module(rest, per) if part == UNET else text_module(rest)
    return None if module is None else f"{part}.{module}"


SDXL_LORAS = LoraNamings("SDXL", (Naming("kohya", PREFIX, kohya_module),))
