"""Qwen3-VL as a text encoder (ComfyUI's `qwen3vl_4b_bf16.safetensors` / `_fp8_scaled`, or an HF
folder): one format, torch-free at import.

A single file is recognised from its header (a Qwen3 language model, with q/k norms and no
biases, beside a Qwen3-VL vision tower) and configured from its shapes. The constants shapes do
not carry are Qwen3-VL-4B's: the rotary base and its interleaved multimodal split of half a head
((24, 20, 20) of 64), the vision tower's 64-wide heads and its DeepStack taps. The vision tower
loads with the model (its weights are in the file) though a text-only prompt never runs it.
"""

from __future__ import annotations

from typing import Any

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, count_blocks, shape_of
from inline_core.diffusion.formats.decoder_lm import decoder_lm_config
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.formats.qwen_vl_keys import from_single, model_shapes

MODEL_TYPE = "qwen3_vl"  # an HF folder's config.json `model_type`
CLASS_NAME = "Qwen3VLModel"
LANGUAGE = "language_model."  # the language model's keys, under `model_shapes`' naming
ROPE_THETA = 5_000_000.0
RMS_EPS = 1e-6
MAX_POSITIONS = 262_144
VISION_HEAD = 64
# The published vision towers' DeepStack taps, by how many they have (24 blocks: 5, 11, 17).
DEEPSTACK = {0: [], 3: [5, 11, 17]}


def is_qwen3_vl(shapes: Shapes) -> bool:
    s = model_shapes(shapes)
    return (
        "language_model.embed_tokens.weight" in s
        and "language_model.layers.0.self_attn.q_norm.weight" in s
        and "language_model.layers.0.self_attn.q_proj.bias" not in s
        and "visual.patch_embed.proj.weight" in s
        and "visual.merger.linear_fc1.weight" in s
    )


def hidden_size(shapes: Shapes) -> int:
    return shape_of(model_shapes(shapes), "language_model.embed_tokens.weight")[1]


def mrope_section(head_dim: int) -> list[int]:
    """The interleaved multimodal rotary split of half a head: (24, 20, 20) of 64."""
    half = head_dim // 2
    side = half * 5 // 16
    return [half - 2 * side, side, side]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`Qwen3VLConfig` kwargs from a single file's shapes (its q-norm is one head wide)."""
    s = model_shapes(shapes)
    head = shape_of(s, f"{LANGUAGE}layers.0.self_attn.q_norm.weight")[0]
    text = decoder_lm_config(
        s,
        head,
        rope_theta=ROPE_THETA,
        rms_eps=RMS_EPS,
        max_positions=MAX_POSITIONS,
        tie_word_embeddings=True,
        prefix=LANGUAGE,
        rope={"mrope_section": mrope_section(head), "mrope_interleaved": True},
    )
    depth = count_blocks(s, r"visual\.blocks\.(\d+)\.")
    if depth == 0:
        raise ConfigInferenceError("no language or vision blocks found")
    width, channels, temporal, patch, _ = shape_of(s, "visual.patch_embed.proj.weight")
    merged = shape_of(s, "visual.merger.linear_fc1.weight")[1]
    merge = round((merged // width) ** 0.5)
    if merge * merge * width != merged:
        raise ConfigInferenceError(f"merger input {merged} is not a square of {width}")
    taps = count_blocks(s, r"visual\.deepstack_merger_list\.(\d+)\.")
    if taps not in DEEPSTACK:
        raise ConfigInferenceError(f"a vision tower with {taps} DeepStack taps is not a known one")
    vision = {
        "depth": depth,
        "hidden_size": width,
        "intermediate_size": shape_of(s, "visual.blocks.0.mlp.linear_fc1.weight")[0],
        # Not in the shapes: the published 64-wide heads (a narrower tower: one head).
        "num_heads": width // VISION_HEAD if width % VISION_HEAD == 0 else 1,
        "in_channels": channels,
        "patch_size": patch,
        "temporal_patch_size": temporal,
        "spatial_merge_size": merge,
        "out_hidden_size": shape_of(s, "visual.merger.linear_fc2.weight")[0],
        "num_position_embeddings": shape_of(s, "visual.pos_embed.weight")[0],
        "deepstack_visual_indexes": DEEPSTACK[taps],
    }
    return {"text_config": text, "vision_config": vision}


FORMAT = ModelFormat(
    what="text encoder",
    title="Qwen3-VL text encoder",
    library="transformers",
    class_name=CLASS_NAME,
    recognize=is_qwen3_vl,
    infer_config=infer_config,
    convert=from_single,
    config_class="Qwen3VLConfig",
)
