"""A decoder-only language model's transformers config from its tensor shapes (torch-free).

Mistral, Qwen3 and their kin lay out their layers alike (`embed_tokens`, `layers.N.self_attn.
{q,k}_proj`, `layers.N.mlp.gate_proj`): widths, depth and head counts are read from the shapes the
same way. What shapes do not show (head width where no q-norm carries it, rope theta, norm eps,
context length, tied embeddings) each format passes in from its model's published constants; a
language model nested in a bigger one (Qwen3-VL's `language_model.`) passes its prefix, and a
rotary embedding with more to it (Qwen3-VL's multimodal split) its further rope parameters, and
one whose rope differs by layer (Gemma 3's) the whole of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, count_blocks, shape_of


def decoder_lm_config(
    shapes: Shapes,
    head_dim: int,
    *,
    rope_theta: float | None = None,
    rms_eps: float,
    max_positions: int,
    tie_word_embeddings: bool,
    prefix: str = "",
    rope: Mapping[str, Any] | None = None,
    rope_parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The config kwargs every such model shares, from `shapes` (its keys under `prefix`: a
    missing tensor is named as the file names it), its attention heads' width and the constants
    its shapes do not show; `rope`: rope parameters beside the base frequency;
    `rope_parameters`: the whole of them instead, where they are not one base frequency (Gemma
    3's, by layer type)."""
    vocab_size, hidden = shape_of(shapes, f"{prefix}embed_tokens.weight")
    q_rows = shape_of(shapes, f"{prefix}layers.0.self_attn.q_proj.weight")[0]
    kv_rows = shape_of(shapes, f"{prefix}layers.0.self_attn.k_proj.weight")[0]
    if head_dim <= 0 or q_rows % head_dim or kv_rows % head_dim:
        raise ConfigInferenceError(f"projection widths are not multiples of head dim {head_dim}")
    if rope_parameters is None:
        if rope_theta is None:
            raise ValueError("decoder_lm_config needs rope_theta or rope_parameters")
        rope_parameters = {"rope_theta": rope_theta, "rope_type": "default", **(rope or {})}
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": shape_of(shapes, f"{prefix}layers.0.mlp.gate_proj.weight")[0],
        "num_hidden_layers": count_blocks(shapes, re.escape(prefix) + r"layers\.(\d+)\."),
        "num_attention_heads": q_rows // head_dim,
        "num_key_value_heads": kv_rows // head_dim,
        "head_dim": head_dim,
        "rms_norm_eps": rms_eps,
        "rope_parameters": dict(rope_parameters),
        "max_position_embeddings": max_positions,
        "tie_word_embeddings": tie_word_embeddings,
    }
