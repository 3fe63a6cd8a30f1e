"""Wan 2.1's transformer format: recognised from a single file's header, configured from its
shapes, renamed to diffusers' `WanTransformer3DModel` keys (torch-free at import).

The 1.3B and 14B models share the architecture; the variant is told from the shapes (width,
depth, feed-forward, text width). The head count is not visible in any shape: Wan's heads are 128
wide (12 for the 1.3B, 40 for the 14B), and models narrower than one such head (the kit's) use 16.
Loading converts with diffusers' own converter; `to_original` writes the original naming back so
the kit's ComfyUI file looks like the ones users have (the round trip is tested).
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
CLASS_NAME = "WanTransformer3DModel"
HEAD_DIM, SMALL_HEAD_DIM = 128, 16
PATCH = (1, 2, 2)
# Published variants, by (width, depth): what health and messages call them.
VARIANTS = {(1536, 30): "1.3B", (5120, 40): "14B", (3072, 30): "TI2V-5B"}
TI2V_CHANNELS = 48  # Wan 2.2 TI2V: latents of the 48-channel Wan 2.2 VAE in, no image embedder
# Image-to-video by channels: 16 noisy latents, a 4-channel first-frame mask, the image's 16.
I2V_CHANNELS = 36


def _body(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return s


def is_wan_transformer(shapes: Shapes) -> bool:
    """A Wan 2.1 transformer in either naming (VACE and Animate models are other families)."""
    s = _body(shapes)
    original = "head.modulation" in s and "patch_embedding.weight" in s
    converted = "scale_shift_table" in s and "condition_embedder.time_proj.weight" in s
    other = any(k.startswith(("vace_blocks.", "motion_encoder.", "face_adapter.")) for k in s)
    return (original or converted) and not other


def is_text_to_video(config: Mapping[str, Any]) -> bool:
    """A text-to-video model: 16 latent channels in, no image embedder."""
    return config.get("in_channels") == 16 and config.get("image_dim") is None


def is_text_image_to_video(config: Mapping[str, Any]) -> bool:
    """A Wan 2.2 TI2V model: text to video, or image to video through its first latent frame."""
    return config.get("in_channels") == TI2V_CHANNELS and config.get("image_dim") is None


def is_channel_image_to_video(config: Mapping[str, Any]) -> bool:
    """An image-to-video model that takes the image's latents as extra input channels (Wan 2.2
    A14B i2v: no image embedder; Wan 2.1's i2v adds a CLIP image embedder)."""
    return config.get("in_channels") == I2V_CHANNELS


def heads_for(dim: int) -> int:
    head = HEAD_DIM if dim >= HEAD_DIM else SMALL_HEAD_DIM
    if dim % head:
        raise ConfigInferenceError(f"width {dim} is not a whole number of {head}-wide heads")
    return dim // head


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """A `WanTransformer3DModel` config from original (ComfyUI) or diffusers naming."""
    s = _body(shapes)
    original = "head.modulation" in s
    patch = shape_of(s, "patch_embedding.weight")
    dim, in_channels = patch[0], patch[1]
    if tuple(patch[2:]) != PATCH:
        raise ConfigInferenceError(f"patch {tuple(patch[2:])} is not Wan's {PATCH}")
    names = (
        (
            "text_embedding.0.weight",
            "time_embedding.0.weight",
            "blocks.0.ffn.0.weight",
            "head.head.weight",
        )
        if original
        else (
            "condition_embedder.text_embedder.linear_1.weight",
            "condition_embedder.time_embedder.linear_1.weight",
            "blocks.0.ffn.net.0.proj.weight",
            "proj_out.weight",
        )
    )
    text, time, ffn, head = (shape_of(s, n) for n in names)
    attn = "self_attn" if original else "attn1"
    cross_norm = "blocks.0.norm3.weight" if original else "blocks.0.norm2.weight"
    image = s.get("img_emb.proj.1.weight") or s.get(
        "condition_embedder.image_embedder.ff.net.0.proj.weight"
    )
    heads = heads_for(dim)
    return {
        "patch_size": list(PATCH),
        "num_attention_heads": heads,
        "attention_head_dim": dim // heads,
        "in_channels": in_channels,
        "out_channels": head[0] // (PATCH[0] * PATCH[1] * PATCH[2]),
        "text_dim": text[1],
        "freq_dim": time[1],
        "ffn_dim": ffn[0],
        "num_layers": count_blocks(s, r"blocks\.(\d+)\."),
        "cross_attn_norm": cross_norm in s,
        "qk_norm": "rms_norm_across_heads" if f"blocks.0.{attn}.norm_q.weight" in s else None,
        "eps": 1e-6,
        "image_dim": None if image is None else image[1],
        "added_kv_proj_dim": None if image is None else dim,
        "rope_max_seq_len": 1024,
    }


def variant(config: Mapping[str, Any]) -> str:
    width = int(config.get("num_attention_heads", 0)) * int(config.get("attention_head_dim", 0))
    return VARIANTS.get((width, int(config.get("num_layers", 0))), "custom")


# The transformer's config without its weights (a folder's, or inferred from a file's shapes).
config_of = ConfigReader(infer_config)

# -- key naming (imports torch) --------------------------------------------------------------------

# diffusers -> original, applied in order (the inverse of diffusers' converter's renames).
_TO_ORIGINAL = (
    # Wan 2.1 i2v's image embedder, before the generic renames (its norm2 is not a block's).
    ("condition_embedder.image_embedder.norm1.", "img_emb.proj.0."),
    ("condition_embedder.image_embedder.ff.net.0.proj.", "img_emb.proj.1."),
    ("condition_embedder.image_embedder.ff.net.2.", "img_emb.proj.3."),
    ("condition_embedder.image_embedder.norm2.", "img_emb.proj.4."),
    ("condition_embedder.time_embedder.linear_1.", "time_embedding.0."),
    ("condition_embedder.time_embedder.linear_2.", "time_embedding.2."),
    ("condition_embedder.text_embedder.linear_1.", "text_embedding.0."),
    ("condition_embedder.text_embedder.linear_2.", "text_embedding.2."),
    ("condition_embedder.time_proj.", "time_projection.1."),
    (".attn1.", ".self_attn."),
    (".attn2.", ".cross_attn."),
    (".to_out.0.", ".o."),
    (".to_q.", ".q."),
    (".to_k.", ".k."),
    (".to_v.", ".v."),
    (".add_k_proj.", ".k_img."),
    (".add_v_proj.", ".v_img."),
    (".norm_added_k.", ".norm_k_img."),
    (".ffn.net.0.proj.", ".ffn.0."),
    (".ffn.net.2.", ".ffn.2."),
    (".norm2.", ".norm3."),  # diffusers' cross-attention norm is the original's norm3
    ("proj_out.", "head.head."),
)


def to_original(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Diffusers keys -> the Wan repository's (what ComfyUI's file holds)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if key == "scale_shift_table":
            out["head.modulation"] = value
            continue
        new = key.replace(".scale_shift_table", ".modulation")
        for old, repl in _TO_ORIGINAL:
            new = new.replace(old, repl)
        out[new] = value
    return out


def from_original(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """Original (optionally prefixed) or diffusers keys -> diffusers (diffusers' converter)."""
    return diffusers_converted(
        sd, PREFIXES, "condition_embedder.time_proj.weight", "convert_wan_transformer_to_diffusers"
    )


FORMAT = ModelFormat(
    what="diffusion model",
    title="Wan 2.1 diffusion model",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_wan_transformer,
    infer_config=infer_config,
    convert=from_original,
    # diffusers casts the timestep's sinusoids to the time embedder's weight dtype.
    computed_at_load=("condition_embedder.time_embedder",),
)
