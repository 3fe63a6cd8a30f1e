"""The CLIP vision image encoder Wan 2.1's image-to-video models are conditioned on (ComfyUI's
`clip_vision/clip_vision_h.safetensors`, or a diffusers folder's `image_encoder/`): one format,
torch-free at import.

A single file is transformers' `CLIPVisionModelWithProjection` naming (what ComfyUI loads:
`vision_model.` keys and a `visual_projection`, which Wan does not use; a file without one gets
a zero one), and loads as that class; a folder loads as its config says (`CLIPVisionModel`). Its
`CLIPVisionConfig` comes from the shapes; the head count is not visible in any shape, and every
published CLIP vision tower (ViT-L, ViT-H, ViT-bigG) has 16 heads. Wan reads the penultimate
layer's hidden states (`WanImageToVideoPipeline.encode_image`). The image processor, when a
single file brings none, is CLIP's (224 px, bicubic, center crop, OpenAI's mean and std), as the
Wan 2.1 i2v folders' `image_processor/` is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
)
from inline_core.diffusion.formats.format import ModelFormat

PATCH = "vision_model.embeddings.patch_embedding.weight"
POSITIONS = "vision_model.embeddings.position_embedding.weight"
FIRST_Q = "vision_model.encoder.layers.0.self_attn.q_proj.weight"
OPEN_CLIP = "visual.transformer.resblocks.0.attn.in_proj_weight"
HEADS = 16
PROJECTION = "visual_projection.weight"
UNUSED = ("vision_model.embeddings.position_ids",)
CLASS_NAME = "CLIPVisionModelWithProjection"
# CLIP's image processor as Wan 2.1's i2v folders carry it.
PROCESSOR_CONFIG: dict[str, Any] = {
    "crop_size": {"height": 224, "width": 224},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "rescale_factor": 1 / 255,
    "size": {"shortest_edge": 224},
}


def is_clip_vision(shapes: Shapes) -> bool:
    return PATCH in shapes and FIRST_Q in shapes


def hidden_size(shapes: Shapes) -> int:
    return shape_of(shapes, PATCH)[0]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`CLIPVisionConfig` kwargs from a single file's shapes."""
    if OPEN_CLIP in shapes:
        raise ConfigInferenceError(
            "an open_clip-named CLIP vision file is not supported; use ComfyUI's "
            "clip_vision_h.safetensors (transformers naming)"
        )
    patch = shape_of(shapes, PATCH)
    hidden, patch_size = patch[0], patch[2]
    side = math.isqrt(shape_of(shapes, POSITIONS)[0] - 1)
    if hidden % HEADS:
        raise ConfigInferenceError(f"CLIP vision width {hidden} is not 16 whole heads")
    return {
        "hidden_size": hidden,
        "intermediate_size": shape_of(shapes, "vision_model.encoder.layers.0.mlp.fc1.weight")[0],
        "num_hidden_layers": count_blocks(shapes, r"vision_model\.encoder\.layers\.(\d+)\."),
        "num_attention_heads": HEADS,
        "num_channels": patch[1],
        "image_size": side * patch_size,
        "patch_size": patch_size,
        "hidden_act": "gelu",  # open_clip's ViT-H (Wan's), not OpenAI's quick_gelu
        "layer_norm_eps": 1e-5,
        "projection_dim": shapes[PROJECTION][0] if PROJECTION in shapes else hidden,
    }


def convert(sd: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in sd.items() if k not in UNUSED}
    if PROJECTION not in out:  # unused by Wan, but the class has one
        import torch

        first = next(iter(out.values()))
        shape = (int(config["projection_dim"]), int(config["hidden_size"]))
        out[PROJECTION] = torch.zeros(shape, dtype=first.dtype, device=first.device)
    return out


FORMAT = ModelFormat(
    what="image encoder",
    title="CLIP vision image encoder",
    library="transformers",
    class_name=CLASS_NAME,
    recognize=is_clip_vision,
    infer_config=infer_config,
    convert=convert,
    config_class="CLIPVisionConfig",
    folder_loader="AutoModel",
)
