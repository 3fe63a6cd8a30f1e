"""Architecture configs inferred from tensor shapes (torch-free), as ComfyUI does for single files.

A single-file checkpoint carries weights but no config. Everything a config needs is either visible
in the shapes (widths, layer counts, head size) or a fixed property of the family (rope, eps), so a
real 12 GB Z-Image file and the kit's 2 MB one go through the same code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Shapes = Mapping[str, tuple[int, ...]]

TRANSFORMER_PREFIXES = ("model.diffusion_model.", "diffusion_model.")
VAE_PREFIXES = ("first_stage_model.", "vae.")
QWEN_PREFIXES = ("model.", "text_model.", "transformer.")

# FLUX VAE latent normalisation (Z-Image uses the FLUX VAE); not stored in ae.safetensors.
FLUX_VAE_SCALING = 0.3611
FLUX_VAE_SHIFT = 0.1159
# ComfyUI's LDM VAE always builds GroupNorm(32, C): a file in that naming implies 32 groups.
LDM_NORM_GROUPS = 32
# Qwen3 constants that are not visible in shapes (Qwen3-4B values; the kit uses the same).
QWEN3_ROPE_THETA = 1_000_000.0
QWEN3_RMS_EPS = 1e-6
QWEN3_MAX_POSITIONS = 40960


class ConfigInferenceError(ValueError):
    """The shapes do not describe a model this family can build."""


def strip_prefix(
    shapes: Shapes, prefixes: tuple[str, ...]
) -> tuple[str, dict[str, tuple[int, ...]]]:
    """Remove the first of `prefixes` that every key starts with (or none)."""
    for prefix in prefixes:
        if shapes and all(k.startswith(prefix) for k in shapes):
            return prefix, {k[len(prefix) :]: v for k, v in shapes.items()}
    return "", dict(shapes)


def _count(shapes: Shapes, pattern: str) -> int:
    rx = re.compile(pattern)
    found = {int(m.group(1)) for k in shapes if (m := rx.match(k))}
    return max(found) + 1 if found else 0


def _shape(shapes: Shapes, *names: str) -> tuple[int, ...]:
    for name in names:
        if name in shapes:
            return shapes[name]
    raise ConfigInferenceError(f"missing tensor {names[0]!r}")


# -- Z-Image transformer -------------------------------------------------------------------------


def is_zimage_transformer(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(shapes, TRANSFORMER_PREFIXES)
    has_embedder = "x_embedder.weight" in s or "all_x_embedder.2-1.weight" in s
    return has_embedder and "cap_embedder.1.weight" in s and "noise_refiner.0.ffn_norm1.weight" in s


def zimage_axes_dims(head_dim: int) -> list[int]:
    """Rope split of a head: Z-Image uses [32, 48, 48] for 128 (a quarter, 3/8, 3/8)."""
    if head_dim % 16 == 0:
        return [head_dim // 4, head_dim * 3 // 8, head_dim * 3 // 8]
    third = (head_dim // 3) // 2 * 2
    return [head_dim - 2 * third, third, third]


def infer_zimage_transformer_config(shapes: Shapes) -> dict[str, Any]:
    """A `ZImageTransformer2DModel` config from original (ComfyUI) or diffusers key naming."""
    _prefix, s = strip_prefix(shapes, TRANSFORMER_PREFIXES)
    x_embed = _shape(s, "x_embedder.weight", "all_x_embedder.2-1.weight")
    dim, patch_in = x_embed[0], x_embed[1]
    patch_size, f_patch_size = 2, 1
    in_channels = patch_in // (patch_size * patch_size * f_patch_size)
    if in_channels * patch_size * patch_size * f_patch_size != patch_in:
        raise ConfigInferenceError(f"x_embedder input {patch_in} is not a 2x2 patch of channels")
    head_dim = _shape(s, "layers.0.attention.q_norm.weight", "layers.0.attention.norm_q.weight")[0]
    if head_dim <= 0 or dim % head_dim:
        raise ConfigInferenceError(f"head dim {head_dim} does not divide model dim {dim}")
    n_heads = dim // head_dim
    if "layers.0.attention.qkv.weight" in s:
        qkv_rows = s["layers.0.attention.qkv.weight"][0]
        n_kv_heads = (qkv_rows // head_dim - n_heads) // 2
    else:
        n_kv_heads = _shape(s, "layers.0.attention.to_k.weight")[0] // head_dim
    if n_kv_heads != n_heads:
        raise ConfigInferenceError("grouped key/value heads are not a Z-Image layout")
    cap_feat_dim = _shape(s, "cap_embedder.1.weight")[1]
    n_layers = _count(s, r"layers\.(\d+)\.")
    n_refiner_layers = _count(s, r"noise_refiner\.(\d+)\.")
    if n_layers == 0 or n_refiner_layers == 0:
        raise ConfigInferenceError("no transformer layers found")
    if _count(s, r"context_refiner\.(\d+)\.") != n_refiner_layers:
        raise ConfigInferenceError("noise and context refiners differ in depth")
    ffn = _shape(s, "layers.0.feed_forward.w1.weight")[0]
    if ffn != int(dim / 3 * 8):
        raise ConfigInferenceError(f"feed-forward width {ffn} is not Z-Image's 8/3 x {dim}")
    return {
        "all_patch_size": [patch_size],
        "all_f_patch_size": [f_patch_size],
        "in_channels": in_channels,
        "dim": dim,
        "n_layers": n_layers,
        "n_refiner_layers": n_refiner_layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "norm_eps": 1e-5,
        "qk_norm": True,
        "cap_feat_dim": cap_feat_dim,
        "rope_theta": 256.0,
        "t_scale": 1000.0,
        "axes_dims": zimage_axes_dims(head_dim),
        "axes_lens": [1536, 512, 512],
    }


# -- FLUX VAE (LDM naming) -----------------------------------------------------------------------


def is_ldm_vae(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(shapes, VAE_PREFIXES)
    return (
        "encoder.conv_in.weight" in s
        and "decoder.conv_out.weight" in s
        and any(k.startswith("encoder.down.") for k in s)
    )


def is_diffusers_vae(shapes: Shapes) -> bool:
    return "encoder.conv_in.weight" in shapes and any(
        k.startswith("encoder.down_blocks.") for k in shapes
    )


def vae_latent_channels(shapes: Shapes) -> int:
    _prefix, s = strip_prefix(shapes, VAE_PREFIXES)
    return _shape(s, "encoder.conv_out.weight")[0] // 2


def infer_ldm_vae_config(shapes: Shapes) -> dict[str, Any]:
    """An `AutoencoderKL` config for an LDM-named VAE such as FLUX's `ae.safetensors`."""
    _prefix, s = strip_prefix(shapes, VAE_PREFIXES)
    n_blocks = _count(s, r"encoder\.down\.(\d+)\.")
    if n_blocks == 0:
        raise ConfigInferenceError("no encoder blocks found")
    channels = [_shape(s, f"encoder.down.{i}.block.0.conv1.weight")[0] for i in range(n_blocks)]
    if any(c % LDM_NORM_GROUPS for c in channels):
        raise ConfigInferenceError(f"channels {channels} do not fit {LDM_NORM_GROUPS} norm groups")
    latent_channels = _shape(s, "encoder.conv_out.weight")[0] // 2
    flux_like = latent_channels == 16
    return {
        "in_channels": _shape(s, "encoder.conv_in.weight")[1],
        "out_channels": _shape(s, "decoder.conv_out.weight")[0],
        "down_block_types": ["DownEncoderBlock2D"] * n_blocks,
        "up_block_types": ["UpDecoderBlock2D"] * n_blocks,
        "block_out_channels": channels,
        "layers_per_block": _count(s, r"encoder\.down\.0\.block\.(\d+)\."),
        "act_fn": "silu",
        "latent_channels": latent_channels,
        "norm_num_groups": LDM_NORM_GROUPS,
        "sample_size": 1024,
        "scaling_factor": FLUX_VAE_SCALING if flux_like else 0.18215,
        "shift_factor": FLUX_VAE_SHIFT if flux_like else None,
        "use_quant_conv": "quant_conv.weight" in s,
        "use_post_quant_conv": "post_quant_conv.weight" in s,
        "mid_block_add_attention": "encoder.mid.attn_1.q.weight" in s,
    }


# -- Qwen3 text encoder --------------------------------------------------------------------------


def is_qwen3(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(_without_lm_head(shapes), QWEN_PREFIXES)
    return "embed_tokens.weight" in s and "layers.0.self_attn.q_norm.weight" in s


def _without_lm_head(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    return {k: v for k, v in shapes.items() if not k.startswith("lm_head.")}


def qwen3_hidden_size(shapes: Shapes) -> int:
    _prefix, s = strip_prefix(_without_lm_head(shapes), QWEN_PREFIXES)
    return _shape(s, "embed_tokens.weight")[1]


def infer_qwen3_config(shapes: Shapes) -> dict[str, Any]:
    """`Qwen3Config` kwargs for a single-file Qwen3 (e.g. ComfyUI's `qwen_3_4b.safetensors`)."""
    _prefix, s = strip_prefix(_without_lm_head(shapes), QWEN_PREFIXES)
    vocab_size, hidden = _shape(s, "embed_tokens.weight")
    head_dim = _shape(s, "layers.0.self_attn.q_norm.weight")[0]
    q_rows = _shape(s, "layers.0.self_attn.q_proj.weight")[0]
    kv_rows = _shape(s, "layers.0.self_attn.k_proj.weight")[0]
    if q_rows % head_dim or kv_rows % head_dim:
        raise ConfigInferenceError(f"projection widths are not multiples of head dim {head_dim}")
    n_layers = _count(s, r"layers\.(\d+)\.")
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": _shape(s, "layers.0.mlp.gate_proj.weight")[0],
        "num_hidden_layers": n_layers,
        "num_attention_heads": q_rows // head_dim,
        "num_key_value_heads": kv_rows // head_dim,
        "head_dim": head_dim,
        "attention_bias": "layers.0.self_attn.q_proj.bias" in s,
        "rms_norm_eps": QWEN3_RMS_EPS,
        "rope_parameters": {"rope_theta": QWEN3_ROPE_THETA, "rope_type": "default"},
        "max_position_embeddings": QWEN3_MAX_POSITIONS,
        "tie_word_embeddings": True,
    }
