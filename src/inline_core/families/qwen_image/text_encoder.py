"""Qwen2.5-VL as Qwen-Image's text encoder (ComfyUI's `qwen_2.5_vl_7b.safetensors`, its
`_fp8_scaled` file, or an HF folder): one format, torch-free at import.

Qwen-Image reads the last hidden state of the language model; the edit models also show it the
reference images, so the vision tower is part of the component (`Qwen2_5_VLModel`, no LM head).
A single file is recognised from its header and configured from its shapes: the published
models' head widths (128 for the language model, 80 for the vision tower) and rotary split are
constants, so narrower ones (the kit's) are read as one head of their width. The special token
ids a single file cannot carry are the tokenizer's (`align_token_ids`, where it is loaded).
"""

from __future__ import annotations

from typing import Any

from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
)
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.formats.qwen_vl_keys import from_single, model_shapes

MODEL_TYPE = "qwen2_5_vl"  # an HF folder's config.json `model_type`
CLASS_NAME = "Qwen2_5_VLModel"
TEXT_HEAD = 128
VISION_HEAD = 80
RMS_EPS = 1e-6
ROPE_THETA = 1_000_000.0
MAX_POSITIONS = 128_000
WINDOW = 112
# Published token ids (Qwen2.5-VL's tokenizer), replaced by a tokenizer's own at load.
TOKEN_IDS = {
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
}
TOKENS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
}


def is_qwen25_vl(shapes: Shapes) -> bool:
    s = model_shapes(shapes)
    return (
        "language_model.embed_tokens.weight" in s
        and "language_model.layers.0.self_attn.q_proj.bias" in s
        and "visual.patch_embed.proj.weight" in s
        and "visual.merger.ln_q.weight" in s
    )


def hidden_size(shapes: Shapes) -> int:
    return shape_of(model_shapes(shapes), "language_model.embed_tokens.weight")[1]


def mrope_section(head_dim: int) -> list[int]:
    """The multimodal rotary split of half a head: (16, 24, 24) of 64."""
    half = head_dim // 2
    if half % 8:
        raise ConfigInferenceError(f"head width {head_dim} is not a multiple of 16")
    return [half // 4, half * 3 // 8, half * 3 // 8]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`Qwen2_5_VLConfig` kwargs from a single file's shapes."""
    s = model_shapes(shapes)
    vocab, hidden = shape_of(s, "language_model.embed_tokens.weight")
    kv_rows = shape_of(s, "language_model.layers.0.self_attn.k_proj.weight")[0]
    head = min(TEXT_HEAD, kv_rows)
    if hidden % head or kv_rows % head:
        raise ConfigInferenceError(f"widths {hidden}, {kv_rows} are not multiples of {head}")
    width, channels, temporal, patch, _ = shape_of(s, "visual.patch_embed.proj.weight")
    vision_head = VISION_HEAD if width % VISION_HEAD == 0 else width
    merged, merge_in = shape_of(s, "visual.merger.mlp.0.weight")
    merge = round((merge_in // width) ** 0.5)
    if merge * merge * width != merge_in or merged != merge_in:
        raise ConfigInferenceError(f"merger input {merge_in} is not a square of {width}")
    depth = count_blocks(s, r"visual\.blocks\.(\d+)\.")
    layers = count_blocks(s, r"language_model\.layers\.(\d+)\.")
    if depth == 0 or layers == 0:
        raise ConfigInferenceError("no language or vision blocks found")
    text = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": shape_of(s, "language_model.layers.0.mlp.gate_proj.weight")[0],
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // head,
        "num_key_value_heads": kv_rows // head,
        "rms_norm_eps": RMS_EPS,
        "max_position_embeddings": MAX_POSITIONS,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": ROPE_THETA,
            "mrope_section": mrope_section(head),
        },
    }
    vision = {
        "depth": depth,
        "hidden_size": width,
        "intermediate_size": shape_of(s, "visual.blocks.0.mlp.gate_proj.weight")[0],
        "num_heads": width // vision_head,
        "in_channels": channels,
        "patch_size": patch,
        "temporal_patch_size": temporal,
        "spatial_merge_size": merge,
        "window_size": WINDOW,
        "out_hidden_size": shape_of(s, "visual.merger.mlp.2.weight")[0],
        "fullatt_block_indexes": [i for i in range(depth) if i % 8 == 7],
    }
    return {"text_config": text, "vision_config": vision, **TOKEN_IDS}


def align_token_ids(model: Any, tokenizer: Any) -> None:
    """Set the model's special token ids to the tokenizer's (a single file carries none)."""
    config = model.config
    for field, token in TOKENS.items():
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id >= 0:
            setattr(config, field, token_id)


FORMAT = ModelFormat(
    what="text encoder",
    title="Qwen2.5-VL text encoder",
    library="transformers",
    class_name=CLASS_NAME,
    recognize=is_qwen25_vl,
    infer_config=infer_config,
    convert=from_single,
    config_class="Qwen2_5_VLConfig",
    folder_loader="AutoModel",
)
