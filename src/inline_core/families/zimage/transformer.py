"""Z-Image's transformer format: recognised from a single file's header, configured from its
shapes, renamed to diffusers' `ZImageTransformer2DModel` keys (torch-free at import).

The original (ComfyUI) naming fuses q/k/v into one `qkv` projection and names a few modules
differently; loading converts with diffusers' own converter, and the kit writes the original
naming back so its files look like the ones users have (the round trip is tested).
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
CLASS_NAME = "ZImageTransformer2DModel"


def is_zimage_transformer(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    has_embedder = "x_embedder.weight" in s or "all_x_embedder.2-1.weight" in s
    return has_embedder and "cap_embedder.1.weight" in s and "noise_refiner.0.ffn_norm1.weight" in s


def axes_dims(head_dim: int) -> list[int]:
    """Rope split of a head: Z-Image uses [32, 48, 48] for 128 (a quarter, 3/8, 3/8)."""
    if head_dim % 16 == 0:
        return [head_dim // 4, head_dim * 3 // 8, head_dim * 3 // 8]
    third = (head_dim // 3) // 2 * 2
    return [head_dim - 2 * third, third, third]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """A `ZImageTransformer2DModel` config from original (ComfyUI) or diffusers key naming."""
    _prefix, s = strip_prefix(shapes, PREFIXES)
    x_embed = shape_of(s, "x_embedder.weight", "all_x_embedder.2-1.weight")
    dim, patch_in = x_embed[0], x_embed[1]
    patch_size, f_patch_size = 2, 1
    in_channels = patch_in // (patch_size * patch_size * f_patch_size)
    if in_channels * patch_size * patch_size * f_patch_size != patch_in:
        raise ConfigInferenceError(f"x_embedder input {patch_in} is not a 2x2 patch of channels")
    head_dim = shape_of(s, "layers.0.attention.q_norm.weight", "layers.0.attention.norm_q.weight")[
        0
    ]
    if head_dim <= 0 or dim % head_dim:
        raise ConfigInferenceError(f"head dim {head_dim} does not divide model dim {dim}")
    n_heads = dim // head_dim
    if "layers.0.attention.qkv.weight" in s:
        qkv_rows = s["layers.0.attention.qkv.weight"][0]
        n_kv_heads = (qkv_rows // head_dim - n_heads) // 2
    else:
        n_kv_heads = shape_of(s, "layers.0.attention.to_k.weight")[0] // head_dim
    if n_kv_heads != n_heads:
        raise ConfigInferenceError("grouped key/value heads are not a Z-Image layout")
    n_layers = count_blocks(s, r"layers\.(\d+)\.")
    n_refiner_layers = count_blocks(s, r"noise_refiner\.(\d+)\.")
    if n_layers == 0 or n_refiner_layers == 0:
        raise ConfigInferenceError("no transformer layers found")
    if count_blocks(s, r"context_refiner\.(\d+)\.") != n_refiner_layers:
        raise ConfigInferenceError("noise and context refiners differ in depth")
    ffn = shape_of(s, "layers.0.feed_forward.w1.weight")[0]
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
        "cap_feat_dim": shape_of(s, "cap_embedder.1.weight")[1],
        "rope_theta": 256.0,
        "t_scale": 1000.0,
        "axes_dims": axes_dims(head_dim),
        "axes_lens": [1536, 512, 512],
    }


# The transformer's config without its weights (a folder's, or inferred from a file's shapes).
config_of = ConfigReader(infer_config)

# -- key naming (imports torch) --------------------------------------------------------------------

_TO_ORIGINAL = (
    ("all_final_layer.2-1.", "final_layer."),
    ("all_x_embedder.2-1.", "x_embedder."),
    (".attention.to_out.0.", ".attention.out."),
    (".attention.norm_k.", ".attention.k_norm."),
    (".attention.norm_q.", ".attention.q_norm."),
)


def to_original(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Diffusers keys -> the original checkpoint's (fused qkv)."""
    import torch

    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if ".attention.to_q.weight" in key:
            stem = key.replace(".attention.to_q.weight", "")
            out[f"{stem}.attention.qkv.weight"] = torch.cat(
                [value, sd[f"{stem}.attention.to_k.weight"], sd[f"{stem}.attention.to_v.weight"]]
            )
            continue
        if ".attention.to_k.weight" in key or ".attention.to_v.weight" in key:
            continue
        new = key
        for old, repl in _TO_ORIGINAL:
            new = new.replace(old, repl)
        out[new] = value
    return out


def from_original(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """Original (optionally `model.diffusion_model.`-prefixed) or diffusers keys -> diffusers."""
    return diffusers_converted(
        sd,
        PREFIXES,
        "all_x_embedder.2-1.weight",
        "convert_z_image_transformer_checkpoint_to_diffusers",
    )


FORMAT = ModelFormat(
    what="diffusion model",
    title="Z-Image diffusion model (no Z-Image weights)",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_zimage_transformer,
    infer_config=infer_config,
    convert=from_original,
    # diffusers casts the timestep's sinusoids to the embedder's first weight's dtype.
    computed_at_load=("t_embedder",),
)
