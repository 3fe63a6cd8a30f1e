"""Krea 2's transformer format (torch-free at import): a diffusers folder, or a single file in
Krea's own naming (ComfyUI's `krea2_turbo_bf16.safetensors`, its `_fp8_scaled` file), recognised
by its `txtfusion` projector as diffusers recognises it, configured from its shapes and renamed
by diffusers' own converter (`convert_krea2_transformer_checkpoint_to_diffusers`). The kit writes
that naming back (`to_original`; the round trip is tested).

The constants shapes do not carry are the published model's: its rotary split of a head
((32, 48, 48) of 128, kept in proportion for a narrower head), base and norm epsilon. The text
encoder is Qwen3-VL (`diffusion/formats/qwen3_vl.py`); the VAE is the Qwen-Image VAE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inline_core.diffusion.files.configs import ConfigReader
from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
    strip_prefix,
)
from inline_core.diffusion.formats.format import ModelFormat, diffusers_converted

if TYPE_CHECKING:
    import torch

PREFIXES = ("model.diffusion_model.", "diffusion_model.")
TRANSFORMER_CLASS = "Krea2Transformer2DModel"
ROPE_THETA = 1000.0
NORM_EPS = 1e-5
MODULATIONS = 6  # a block's shift/scale/gate pairs, stored flat in Krea's naming

# Krea's module names -> diffusers' (the renames of diffusers' converter): whole prefixes, then
# names inside a block.
PREFIX_RENAMES = (
    ("first.", "img_in."),
    ("tmlp.0.", "time_embed.linear_1."),
    ("tmlp.2.", "time_embed.linear_2."),
    ("tproj.1.", "time_mod_proj."),
    ("txtmlp.0.scale", "txt_in.norm.weight"),
    ("txtmlp.1.", "txt_in.linear_1."),
    ("txtmlp.3.", "txt_in.linear_2."),
    ("txtfusion.", "text_fusion."),
    ("blocks.", "transformer_blocks."),
    ("last.linear.", "final_layer.linear."),
    ("last.norm.scale", "final_layer.norm.weight"),
    ("last.modulation.lin", "final_layer.scale_shift_table"),
)
BLOCK_RENAMES = (
    (".attn.wq.", ".attn.to_q."),
    (".attn.wk.", ".attn.to_k."),
    (".attn.wv.", ".attn.to_v."),
    (".attn.wo.", ".attn.to_out.0."),
    (".attn.gate.", ".attn.to_gate."),
    (".attn.qknorm.qnorm.scale", ".attn.norm_q.weight"),
    (".attn.qknorm.knorm.scale", ".attn.norm_k.weight"),
    (".mlp.", ".ff."),
    (".prenorm.scale", ".norm1.weight"),
    (".postnorm.scale", ".norm2.weight"),
    (".mod.lin", ".scale_shift_table"),
)


def is_krea2_file(shapes: Shapes) -> bool:
    """A Krea 2 transformer in Krea's naming or diffusers'."""
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return "txtfusion.projector.weight" in s or "text_fusion.projector.weight" in s


def diffusers_key(key: str) -> str:
    """A key of Krea's naming as diffusers names it (a diffusers key unchanged)."""
    for old, new in PREFIX_RENAMES:
        if key.startswith(old):
            key = new + key[len(old) :]
            break
    for old, new in BLOCK_RENAMES:
        key = key.replace(old, new)
    return key


def rope_axes(head_dim: int) -> list[int]:
    """The rotary split of a head: (32, 48, 48) of 128."""
    if head_dim % 8:
        raise ConfigInferenceError(f"head width {head_dim} is not a multiple of 8")
    side = head_dim * 3 // 8
    return [head_dim - 2 * side, side, side]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """A `Krea2Transformer2DModel` config from Krea's key naming or diffusers'."""
    _prefix, raw = strip_prefix(shapes, PREFIXES)
    s = {diffusers_key(k): v for k, v in raw.items()}
    hidden, in_channels = shape_of(s, "img_in.weight")
    head = shape_of(s, "transformer_blocks.0.attn.norm_q.weight")[0]
    kv_rows = shape_of(s, "transformer_blocks.0.attn.to_k.weight")[0]
    if head <= 0 or hidden % head or kv_rows % head:
        raise ConfigInferenceError(f"head width {head} does not divide {hidden} and {kv_rows}")
    text_hidden = shape_of(s, "txt_in.linear_1.weight")[1]
    text_head = shape_of(s, "text_fusion.layerwise_blocks.0.attn.norm_q.weight")[0]
    text_kv = shape_of(s, "text_fusion.layerwise_blocks.0.attn.to_k.weight")[0]
    layers = count_blocks(s, r"transformer_blocks\.(\d+)\.")
    if layers == 0 or text_head <= 0 or text_hidden % text_head or text_kv % text_head:
        raise ConfigInferenceError("no transformer blocks, or text heads that do not fit")
    return {
        "in_channels": in_channels,
        "num_layers": layers,
        "attention_head_dim": head,
        "num_attention_heads": hidden // head,
        "num_key_value_heads": kv_rows // head,
        "intermediate_size": shape_of(s, "transformer_blocks.0.ff.gate.weight")[0],
        "timestep_embed_dim": shape_of(s, "time_embed.linear_1.weight")[1],
        "text_hidden_dim": text_hidden,
        "num_text_layers": shape_of(s, "text_fusion.projector.weight")[1],
        "text_num_attention_heads": text_hidden // text_head,
        "text_num_key_value_heads": text_kv // text_head,
        "text_intermediate_size": shape_of(s, "text_fusion.layerwise_blocks.0.ff.gate.weight")[0],
        "num_layerwise_text_blocks": count_blocks(s, r"text_fusion\.layerwise_blocks\.(\d+)\."),
        "num_refiner_text_blocks": count_blocks(s, r"text_fusion\.refiner_blocks\.(\d+)\."),
        "axes_dims_rope": rope_axes(head),
        "rope_theta": ROPE_THETA,
        "norm_eps": NORM_EPS,
    }


# The transformer's config without its weights (a folder's, or inferred from a file's shapes).
config_of = ConfigReader(infer_config)


def from_original(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """Krea's (optionally prefixed) or diffusers keys -> diffusers."""
    return diffusers_converted(
        sd, PREFIXES, "img_in.weight", "convert_krea2_transformer_checkpoint_to_diffusers"
    )


def krea_key(key: str) -> str:
    """A diffusers key as Krea's naming has it: the converter's renames, undone in its order."""
    for krea, ours in PREFIX_RENAMES:
        if key.startswith(ours):
            key = krea + key[len(ours) :]
            break
    for krea, ours in BLOCK_RENAMES:
        key = key.replace(ours, krea)
    return key


def to_original(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Diffusers keys -> Krea's, as ComfyUI's files name them (the kit; imports torch)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        new = krea_key(key)
        if new.startswith("blocks.") and new.endswith(".mod.lin"):
            value = value.reshape(-1)  # stored flat: six modulation vectors in one
        out[new] = value
    return out


TRANSFORMER = ModelFormat(
    what="diffusion model",
    title="Krea 2 diffusion model",
    library="diffusers",
    class_name=TRANSFORMER_CLASS,
    recognize=is_krea2_file,
    infer_config=infer_config,
    convert=from_original,
)
