"""Qwen-Image's transformer format: `QwenImageTransformer2DModel`, recognised from a single file's
header, configured from its shapes (torch-free at import).

ComfyUI's files (`qwen_image_bf16.safetensors`, `qwen_image_edit_2509_*.safetensors`, ...) keep
diffusers' key names, optionally under `model.diffusion_model.`. The head width is the q norm's;
the rotary split is the published (16, 56, 56) of 128, scaled for a narrower head. Edit 2511's
file carries a `__index_timestep_zero__` marker (ComfyUI reads it the same way): its reference
latents are modulated at timestep zero, diffusers' `zero_cond_t`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.configs import ConfigReader
from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
    strip_prefix,
)
from inline_core.diffusion.formats.format import ModelFormat

PREFIXES = ("model.diffusion_model.", "diffusion_model.")
CLASS_NAME = "QwenImageTransformer2DModel"
ZERO_COND_MARKER = "__index_timestep_zero__"
PATCH = 2
MARKERS = (
    "img_in.weight",
    "txt_in.weight",
    "txt_norm.weight",
    "transformer_blocks.0.img_mod.1.weight",
)


def _body(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return dict(s)


def is_qwen_image_transformer(shapes: Shapes) -> bool:
    s = _body(shapes)
    return all(k in s for k in MARKERS)


def zero_cond(shapes: Shapes) -> bool:
    """Edit 2511's reference-latent modulation (the file's marker)."""
    return ZERO_COND_MARKER in _body(shapes)


def axes_dims(head_dim: int) -> list[int]:
    """The rotary split of a head: (16, 56, 56) of 128, an eighth and twice 7/16."""
    if head_dim % 32:
        raise ConfigInferenceError(f"head width {head_dim} is not a multiple of 32")
    return [head_dim // 8, head_dim * 7 // 16, head_dim * 7 // 16]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`QwenImageTransformer2DModel` kwargs from a single file's shapes."""
    s = _body(shapes)
    dim, in_channels = shape_of(s, "img_in.weight")
    head_dim = shape_of(s, "transformer_blocks.0.attn.norm_q.weight")[0]
    if head_dim <= 0 or dim % head_dim:
        raise ConfigInferenceError(f"head width {head_dim} does not divide the model width {dim}")
    out = shape_of(s, "proj_out.weight")[0]
    if out % (PATCH * PATCH):
        raise ConfigInferenceError(f"output width {out} is not a 2x2 patch of channels")
    layers = count_blocks(s, r"transformer_blocks\.(\d+)\.")
    if layers == 0:
        raise ConfigInferenceError("no transformer blocks found")
    return {
        "patch_size": PATCH,
        "in_channels": in_channels,
        "out_channels": out // (PATCH * PATCH),
        "num_layers": layers,
        "attention_head_dim": head_dim,
        "num_attention_heads": dim // head_dim,
        "joint_attention_dim": shape_of(s, "txt_in.weight")[1],
        "guidance_embeds": "time_text_embed.guidance_embedder.linear_1.weight" in s,
        "axes_dims_rope": axes_dims(head_dim),
        "zero_cond_t": ZERO_COND_MARKER in s,
        "use_additional_t_cond": "time_text_embed.addition_t_embedding.weight" in s,
    }


# The transformer's config without its weights (a folder's, or inferred from a file's shapes).
config_of = ConfigReader(infer_config)


def from_single(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """A single file's keys -> diffusers' (the prefix cut, the 2511 marker left out)."""
    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in sd.items()}, PREFIXES)
    return {k[len(prefix) :]: v for k, v in sd.items() if not k.endswith(ZERO_COND_MARKER)}


FORMAT = ModelFormat(
    what="diffusion model",
    title="Qwen-Image diffusion model",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_qwen_image_transformer,
    infer_config=infer_config,
    convert=from_single,
)
