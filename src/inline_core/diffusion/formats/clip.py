"""CLIP text encoders (SD 1.x's CLIP-L, SDXL's CLIP-L and OpenCLIP bigG): one format per kind.

A file comes in one of two namings: transformers' (`text_model.*`, ComfyUI's `clip_l.safetensors`
and `clip_g.safetensors`, a Stability checkpoint's `conditioner.embedders.0.transformer.*`) or
OpenCLIP's (`token_embedding`, `transformer.resblocks.N.attn.in_proj_weight`, `ln_final`,
`text_projection`: a Stability checkpoint's `conditioner.embedders.1.model.*`). Both are read as
transformers' `CLIPTextModel` (or `...WithProjection` where the model projects its pooled output),
the config inferred from shapes. What shapes do not show is the kind's: CLIP-L's activation is
`quick_gelu`, OpenCLIP's `gelu`; both have 64-wide heads. Torch-free at import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from inline_core.diffusion.files.shapes import (
    ConfigInferenceError,
    Shapes,
    count_blocks,
    shape_of,
    strip_prefix,
)
from inline_core.diffusion.formats.format import ModelFormat

if TYPE_CHECKING:
    import torch

    StateDict = dict[str, torch.Tensor]

# A checkpoint view's keys start with these (the view's own prefix is already cut).
PREFIXES = ("transformer.", "model.")
HF_EMBED = "text_model.embeddings.token_embedding.weight"
OPENCLIP_EMBED = "token_embedding.weight"
TEXT_MODEL = "text_model."
HEAD_WIDTH = 64
LAYER_NORM_EPS = 1e-5
MODEL_TYPE = "clip_text_model"  # an HF folder's config.json `model_type`

Activation = Literal["quick_gelu", "gelu"]


def _body(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return s


def is_openclip(shapes: Shapes) -> bool:
    return OPENCLIP_EMBED in _body(shapes)


def is_clip_text(shapes: Shapes) -> bool:
    s = _body(shapes)
    return HF_EMBED in s or (OPENCLIP_EMBED in s and "positional_embedding" in s)


def hidden_size(shapes: Shapes) -> int:
    s = _body(shapes)
    return shape_of(s, HF_EMBED, OPENCLIP_EMBED)[1]


def projects(shapes: Shapes) -> bool:
    """Whether the file projects its pooled output (CLIP-G's, and ComfyUI's CLIP-L saves)."""
    s = _body(shapes)
    return "text_projection.weight" in s or "text_projection" in s


def infer_config(shapes: Shapes, activation: Activation) -> dict[str, Any]:
    """`CLIPTextConfig` kwargs; bos and eos are the two last ids, as in CLIP's vocabulary."""
    s = _body(shapes)
    if not is_clip_text(s):
        raise ConfigInferenceError("no CLIP token embedding")
    openclip = OPENCLIP_EMBED in s
    vocab, hidden = shape_of(s, HF_EMBED, OPENCLIP_EMBED)
    if openclip:
        layers = count_blocks(s, r"transformer\.resblocks\.(\d+)\.")
        intermediate = shape_of(s, "transformer.resblocks.0.mlp.c_fc.weight")[0]
        positions = shape_of(s, "positional_embedding")[0]
        projection = shape_of(s, "text_projection")[1] if "text_projection" in s else hidden
    else:
        layers = count_blocks(s, r"text_model\.encoder\.layers\.(\d+)\.")
        intermediate = shape_of(s, "text_model.encoder.layers.0.mlp.fc1.weight")[0]
        positions = shape_of(s, "text_model.embeddings.position_embedding.weight")[0]
        proj = s.get("text_projection.weight")
        projection = proj[0] if proj is not None else hidden
    if layers == 0 or hidden % HEAD_WIDTH:
        raise ConfigInferenceError(f"{layers} layers of width {hidden}: not a CLIP text model")
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // HEAD_WIDTH,
        "max_position_embeddings": positions,
        "projection_dim": projection,
        "hidden_act": activation,
        "layer_norm_eps": LAYER_NORM_EPS,
        "bos_token_id": vocab - 2,
        "eos_token_id": vocab - 1,
        "pad_token_id": 1,
    }


# -- key naming (imports torch) --------------------------------------------------------------------

# OpenCLIP -> transformers, for the names outside the attention's fused projection.
_OPENCLIP_NAMES = (
    ("transformer.resblocks.", "text_model.encoder.layers."),
    (".ln_1.", ".layer_norm1."),
    (".ln_2.", ".layer_norm2."),
    (".mlp.c_fc.", ".mlp.fc1."),
    (".mlp.c_proj.", ".mlp.fc2."),
    (".attn.out_proj.", ".self_attn.out_proj."),
)
_OPENCLIP_TOP = {
    "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
    "positional_embedding": "text_model.embeddings.position_embedding.weight",
    "ln_final.weight": "text_model.final_layer_norm.weight",
    "ln_final.bias": "text_model.final_layer_norm.bias",
}
_DROPPED = ("logit_scale", "text_model.embeddings.position_ids", "attn_mask")


def to_transformers(sd: StateDict, _config: Mapping[str, Any]) -> StateDict:
    """Either naming -> transformers' CLIP keys (the fused q/k/v split in three)."""
    prefix, _ = strip_prefix({k: () for k in sd}, PREFIXES)
    body = {k[len(prefix) :]: v for k, v in sd.items()}
    out: StateDict = {}
    for key, value in body.items():
        if key in _DROPPED:
            continue
        if key in _OPENCLIP_TOP:
            out[_OPENCLIP_TOP[key]] = value
        elif key == "text_projection":  # OpenCLIP multiplies x @ P; a Linear holds P.T
            out["text_projection.weight"] = value.T.contiguous()
        elif m := re.fullmatch(r"transformer\.resblocks\.(\d+)\.attn\.in_proj_(weight|bias)", key):
            base = f"text_model.encoder.layers.{m[1]}.self_attn"
            for name, part in zip(("q", "k", "v"), value.chunk(3), strict=True):
                out[f"{base}.{name}_proj.{m[2]}"] = part.contiguous()
        elif key.startswith("transformer.resblocks."):
            for old, new in _OPENCLIP_NAMES:
                key = key.replace(old, new)
            out[key] = value
        else:
            out[key] = value
    return out


def to_openclip(sd: Mapping[str, torch.Tensor]) -> StateDict:
    """transformers' CLIP keys -> OpenCLIP's (the kit writes a Stability checkpoint's CLIP-G)."""
    import torch

    top = {new: old for old, new in _OPENCLIP_TOP.items()}
    out: StateDict = {}
    fused: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in sd.items():
        if key in top:
            out[top[key]] = value
        elif key == "text_projection.weight":
            out["text_projection"] = value.T.contiguous()
        elif m := re.fullmatch(
            r"text_model\.encoder\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(.+)", key
        ):
            fused.setdefault(f"transformer.resblocks.{m[1]}.attn.in_proj_{m[3]}", {})[m[2]] = value
        elif key.startswith("text_model.encoder.layers."):
            for old, new in _OPENCLIP_NAMES:
                key = key.replace(new, old)
            out[key] = value
    for key, parts in fused.items():
        out[key] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out


def clip_format(kind: Literal["l", "g"]) -> ModelFormat:
    """CLIP-L (`quick_gelu`, `CLIPTextModel`) or OpenCLIP bigG (`gelu`, with its projection)."""
    activation: Activation = "quick_gelu" if kind == "l" else "gelu"
    return ModelFormat(
        what="text encoder",
        title=f"CLIP-{kind.upper()} text encoder",
        library="transformers",
        class_name="CLIPTextModel" if kind == "l" else "CLIPTextModelWithProjection",
        config_class="CLIPTextConfig",
        recognize=is_clip_text,
        infer_config=lambda shapes: infer_config(shapes, activation),
        convert=_without_projection if kind == "l" else to_transformers,
    )


def _without_projection(sd: StateDict, config: Mapping[str, Any]) -> StateDict:
    """CLIP-L as `CLIPTextModel`, which (transformers 5) holds the text model's modules at its
    top; a projection some saves carry is not part of it."""
    converted = to_transformers(sd, config)
    converted.pop("text_projection.weight", None)
    return {k.removeprefix(TEXT_MODEL): v for k, v in converted.items()}


def with_text_model(sd: Mapping[str, torch.Tensor]) -> StateDict:
    """`CLIPTextModel`'s keys as files name them (under `text_model.`)."""
    return {k if k.startswith(TEXT_MODEL) else TEXT_MODEL + k: v for k, v in sd.items()}


CLIP_L = clip_format("l")
CLIP_G = clip_format("g")
