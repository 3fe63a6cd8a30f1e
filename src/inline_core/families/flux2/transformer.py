"""FLUX.2's transformer format: recognised from a single file's header, configured from its
shapes, renamed to diffusers' `Flux2Transformer2DModel` keys (torch-free at import).

BFL's (ComfyUI's) files fuse q/k/v and name modules after the reference code; loading converts
with diffusers' own converter, and the kit writes that naming back (the round trip is tested).
diffusers' single-file loader calls every FLUX.2 file dev; here the variant is told from the
shapes (`variants.py`).
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
CLASS_NAME = "Flux2Transformer2DModel"
ROPE_THETA = 2000  # FLUX.2's, not visible in shapes
ROPE_AXES = 4  # (t, h, w, l) position axes, each a quarter of a head


def is_flux2_transformer(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    original = "single_stream_modulation.lin.weight" in s and "img_in.weight" in s
    diffusers = "single_stream_modulation.linear.weight" in s and "x_embedder.weight" in s
    return original or diffusers


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """A `Flux2Transformer2DModel` config from BFL's (ComfyUI's) or diffusers' key naming."""
    _prefix, s = strip_prefix(shapes, PREFIXES)
    inner, in_channels = shape_of(s, "img_in.weight", "x_embedder.weight")
    head_dim = shape_of(
        s,
        "double_blocks.0.img_attn.norm.query_norm.scale",
        "transformer_blocks.0.attn.norm_q.weight",
    )[0]
    if head_dim <= 0 or inner % head_dim or head_dim % ROPE_AXES:
        raise ConfigInferenceError(f"head dim {head_dim} does not fit model dim {inner}")
    mlp_rows = shape_of(
        s, "double_blocks.0.img_mlp.0.weight", "transformer_blocks.0.ff.linear_in.weight"
    )[0]
    double = max(
        count_blocks(s, r"double_blocks\.(\d+)\."), count_blocks(s, r"transformer_blocks\.(\d+)\.")
    )
    single = max(
        count_blocks(s, r"single_blocks\.(\d+)\."),
        count_blocks(s, r"single_transformer_blocks\.(\d+)\."),
    )
    if double == 0 or single == 0:
        raise ConfigInferenceError("no transformer blocks found")
    out_channels = shape_of(s, "final_layer.linear.weight", "proj_out.weight")[0]
    guidance = any(
        k.startswith(("guidance_in.", "time_guidance_embed.guidance_embedder.")) for k in s
    )
    return {
        "patch_size": 1,
        "in_channels": in_channels,
        "out_channels": out_channels,
        "num_layers": double,
        "num_single_layers": single,
        "attention_head_dim": head_dim,
        "num_attention_heads": inner // head_dim,
        "joint_attention_dim": shape_of(s, "txt_in.weight", "context_embedder.weight")[1],
        "timestep_guidance_channels": shape_of(
            s, "time_in.in_layer.weight", "time_guidance_embed.timestep_embedder.linear_1.weight"
        )[1],
        "mlp_ratio": mlp_rows / 2 / inner,
        "axes_dims_rope": [head_dim // ROPE_AXES] * ROPE_AXES,
        "rope_theta": ROPE_THETA,
        "eps": 1e-6,
        "guidance_embeds": guidance,
    }


# The transformer's config without its weights (a folder's, or inferred from a file's shapes).
config_of = ConfigReader(infer_config)


def from_original(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """BFL's (optionally `model.diffusion_model.`-prefixed) or diffusers keys -> diffusers."""
    return diffusers_converted(
        sd, PREFIXES, "x_embedder.weight", "convert_flux2_transformer_checkpoint_to_diffusers"
    )


# -- key naming back to BFL's (the kit; imports torch) ---------------------------------------------

_RENAMES = (
    ("x_embedder.", "img_in."),
    ("context_embedder.", "txt_in."),
    ("time_guidance_embed.timestep_embedder.linear_1.", "time_in.in_layer."),
    ("time_guidance_embed.timestep_embedder.linear_2.", "time_in.out_layer."),
    ("time_guidance_embed.guidance_embedder.linear_1.", "guidance_in.in_layer."),
    ("time_guidance_embed.guidance_embedder.linear_2.", "guidance_in.out_layer."),
    ("double_stream_modulation_img.linear.", "double_stream_modulation_img.lin."),
    ("double_stream_modulation_txt.linear.", "double_stream_modulation_txt.lin."),
    ("single_stream_modulation.linear.", "single_stream_modulation.lin."),
    ("proj_out.", "final_layer.linear."),
)
_DOUBLE = {
    "attn.norm_q.weight": "img_attn.norm.query_norm.scale",
    "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
    "attn.to_out.0.weight": "img_attn.proj.weight",
    "ff.linear_in.weight": "img_mlp.0.weight",
    "ff.linear_out.weight": "img_mlp.2.weight",
    "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
    "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale",
    "attn.to_add_out.weight": "txt_attn.proj.weight",
    "ff_context.linear_in.weight": "txt_mlp.0.weight",
    "ff_context.linear_out.weight": "txt_mlp.2.weight",
}
_SINGLE = {
    "attn.to_qkv_mlp_proj.weight": "linear1.weight",
    "attn.to_out.weight": "linear2.weight",
    "attn.norm_q.weight": "norm.query_norm.scale",
    "attn.norm_k.weight": "norm.key_norm.scale",
}
_FUSED = {
    "img_attn.qkv.weight": ("to_q", "to_k", "to_v"),
    "txt_attn.qkv.weight": ("add_q_proj", "add_k_proj", "add_v_proj"),
}


def to_original(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Diffusers keys -> BFL's (fused qkv; the final norm's shift and scale in their order)."""
    import torch

    out: dict[str, torch.Tensor] = {}
    blocks: set[str] = set()
    for key, value in sd.items():
        if key == "norm_out.linear.weight":
            scale, shift = value.chunk(2, dim=0)
            out["final_layer.adaLN_modulation.1.weight"] = torch.cat([shift, scale])
        elif key.startswith("transformer_blocks."):
            _, index, rest = key.split(".", 2)
            if rest in _DOUBLE:
                out[f"double_blocks.{index}.{_DOUBLE[rest]}"] = value
            else:
                blocks.add(index)
        elif key.startswith("single_transformer_blocks."):
            _, index, rest = key.split(".", 2)
            out[f"single_blocks.{index}.{_SINGLE[rest]}"] = value
        else:
            new = key
            for old, repl in _RENAMES:
                new = new.replace(old, repl) if new.startswith(old) else new
            out[new] = value
    for index in blocks:
        for fused, names in _FUSED.items():
            parts = [sd[f"transformer_blocks.{index}.attn.{n}.weight"] for n in names]
            out[f"double_blocks.{index}.{fused}"] = torch.cat(parts)
    return out


FORMAT = ModelFormat(
    what="diffusion model",
    title="FLUX.2 diffusion model",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_flux2_transformer,
    infer_config=infer_config,
    convert=from_original,
)
