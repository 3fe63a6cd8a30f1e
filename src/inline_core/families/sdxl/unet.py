"""The Stable Diffusion UNet in its original (LDM) naming: SDXL's and SD 1.x's, one format.

A checkpoint's `model.diffusion_model.*` (or a split file of the same keys) is recognised from
its header (torch-free), its `UNet2DConditionModel` config inferred from shapes as ComfyUI's
`model_detection` does, and renamed with diffusers' own single-file converter; `to_ldm` is the
way back (the kit writes files in the naming people have; the round trip is tested). What shapes
do not show is the architecture's: SDXL's heads are 64 wide and its size embedding 256 per
number; SD 1.x has 8 heads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

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

PREFIX = "model.diffusion_model."
PREFIXES = (PREFIX,)
HEAD_WIDTH = 64  # SDXL's (and SD 2's) `num_head_channels`
SD1_HEADS = 8  # SD 1.x's `num_heads`
TIME_EMBED_DIM = 256  # SDXL's per-number size embedding (`addition_time_embed_dim`)
CONFIG_KEYS = "input_blocks.0.0.weight"


def _body(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return s


def is_ldm_unet(shapes: Shapes) -> bool:
    s = _body(shapes)
    return (
        CONFIG_KEYS in s
        and "out.2.weight" in s
        and "time_embed.0.weight" in s
        and any(k.startswith("middle_block.") for k in s)
    )


def is_sdxl(shapes: Shapes) -> bool:
    """An SDXL UNet (base or refiner): its pooled-text and size embedding (`label_emb`)."""
    return is_ldm_unet(shapes) and "label_emb.0.0.weight" in _body(shapes)


def is_sd1(shapes: Shapes) -> bool:
    """An SD 1.x UNet: no size embedding, and convolutions projecting into its transformers
    (SD 2.x's projections are linear, its heads 64 wide: another model)."""
    s = _body(shapes)
    if not is_ldm_unet(s) or "label_emb.0.0.weight" in s:
        return False
    projection = next((v for k, v in s.items() if k.endswith(".proj_in.weight")), None)
    return projection is not None and len(projection) == 4


def looks_sd1(keys: list[str]) -> str | None:
    """What a checkpoint's model keys that are not SD 1.x's look like, where this format tells."""
    if CONFIG_KEYS not in keys:
        return None
    if "label_emb.0.0.weight" in keys:
        return "an SDXL UNet (its label_emb size embedding)"
    return (
        "a Stable Diffusion 2.x UNet (linear projections into its transformers, where SD 1.x's "
        "are convolutions)"
    )


def looks(keys: list[str]) -> str | None:
    """What a checkpoint's model keys that are not SDXL's look like, where this format tells: a
    Stable Diffusion UNet without SDXL's size embedding (SD 1.x/2.x); None: not this naming."""
    if CONFIG_KEYS not in keys or "label_emb.0.0.weight" in keys:
        return None
    return (
        "a Stable Diffusion 1.x/2.x UNet (input_blocks, middle_block, output_blocks in the "
        "original naming, without SDXL's label_emb size embedding)"
    )


def _layout(s: Mapping[str, tuple[int, ...]]) -> tuple[int, int]:
    """(levels, resnets per level) from the input blocks: each level has its resnets, then a
    downsampler but the last."""
    count = count_blocks(s, r"input_blocks\.(\d+)\.")
    downs = sorted(
        int(m[1]) for k in s if (m := re.fullmatch(r"input_blocks\.(\d+)\.0\.op\.weight", k))
    )
    if not downs or count % downs[0]:
        raise ConfigInferenceError(f"{count} input blocks do not make whole levels")
    return count // downs[0], downs[0] - 1


def _depth(s: Mapping[str, tuple[int, ...]], block: str) -> int:
    return count_blocks(s, rf"{re.escape(block)}\.transformer_blocks\.(\d+)\.")


def infer_config(shapes: Shapes) -> dict[str, Any]:
    s = _body(shapes)
    if not is_ldm_unet(s):
        raise ConfigInferenceError("not a UNet in the original naming")
    levels, per_level = _layout(s)
    channels: list[int] = []
    depths: list[int] = []
    for level in range(levels):
        first = f"input_blocks.{1 + level * (per_level + 1)}"
        channels.append(shape_of(s, f"{first}.0.out_layers.3.weight")[0])
        depths.append(_depth(s, f"{first}.1"))
    attention = [d > 0 for d in depths]
    if not any(attention):
        raise ConfigInferenceError("a UNet without cross-attention")
    level = attention.index(True)
    block = f"input_blocks.{1 + level * (per_level + 1)}.1"
    context = shape_of(s, f"{block}.transformer_blocks.0.attn2.to_k.weight")[1]
    linear = len(shape_of(s, f"{block}.proj_in.weight")) == 2
    adm = s.get("label_emb.0.0.weight")
    heads = (
        [max(c // HEAD_WIDTH, 1) for c in channels]
        if adm is not None or linear
        else [SD1_HEADS] * levels
    )
    config: dict[str, Any] = {
        "sample_size": 128,
        "in_channels": shape_of(s, CONFIG_KEYS)[1],
        "out_channels": shape_of(s, "out.2.weight")[0],
        "down_block_types": ["CrossAttnDownBlock2D" if a else "DownBlock2D" for a in attention],
        "up_block_types": ["CrossAttnUpBlock2D" if a else "UpBlock2D" for a in reversed(attention)],
        "block_out_channels": channels,
        "layers_per_block": per_level,
        "cross_attention_dim": context,
        "attention_head_dim": heads,
        "use_linear_projection": linear,
        "transformer_layers_per_block": [max(d, 1) for d in depths],
    }
    middle = _depth(s, "middle_block.1")
    if middle and not depths[-1]:
        # A last level without attention (SDXL's refiner): diffusers' middle block reads the
        # last level's depth, which the level itself does not use.
        config["transformer_layers_per_block"][-1] = middle
    elif middle and middle != max(depths[-1], 1):
        raise ConfigInferenceError(f"a middle block {middle} deep under a last level {depths[-1]}")
    if adm is not None:
        config |= {
            "addition_embed_type": "text_time",
            "addition_time_embed_dim": TIME_EMBED_DIM,
            "projection_class_embeddings_input_dim": adm[1],
        }
    return config


def pooled_width(config: Mapping[str, Any]) -> int | None:
    """The pooled text embedding an SDXL UNet takes (its size embedding's inputs beside it)."""
    total = config.get("projection_class_embeddings_input_dim")
    if not isinstance(total, int):
        return None
    return total - 6 * TIME_EMBED_DIM


# -- key naming (imports torch) --------------------------------------------------------------------


def from_ldm(sd: StateDict, config: Mapping[str, Any]) -> StateDict:
    """Original keys -> diffusers `UNet2DConditionModel` keys, with diffusers' own converter."""
    from inline_core.diffusion.libs import module

    _prefix, _ = strip_prefix({k: () for k in sd}, PREFIXES)
    prefixed = {(k if k.startswith(PREFIX) else PREFIX + k): v for k, v in sd.items()}
    convert = module("diffusers.loaders.single_file_utils").convert_ldm_unet_checkpoint
    return cast("StateDict", convert(prefixed, dict(config)))


_RESNET = (
    ("norm1", "in_layers.0"),
    ("conv1", "in_layers.2"),
    ("norm2", "out_layers.0"),
    ("conv2", "out_layers.3"),
    ("time_emb_proj", "emb_layers.1"),
    ("conv_shortcut", "skip_connection"),
)
_TOP = {
    "time_embedding.linear_1": "time_embed.0",
    "time_embedding.linear_2": "time_embed.2",
    "add_embedding.linear_1": "label_emb.0.0",
    "add_embedding.linear_2": "label_emb.0.2",
    "conv_in": "input_blocks.0.0",
    "conv_norm_out": "out.0",
    "conv_out": "out.2",
}


def _resnet(rest: str) -> str:
    name, _, param = rest.partition(".")
    return f"{dict(_RESNET).get(name, name)}.{param}"


def to_ldm(sd: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> StateDict:
    """diffusers `UNet2DConditionModel` keys -> the original naming (under no prefix)."""
    per = int(config["layers_per_block"])
    attention_up = [t.startswith("CrossAttn") for t in config["up_block_types"]]
    out: StateDict = {}
    for key, value in sd.items():
        layer, _, param = key.rpartition(".")
        new: str
        if layer in _TOP:
            new = f"{_TOP[layer]}.{param}"
        elif m := re.fullmatch(r"down_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", key):
            new = f"input_blocks.{1 + int(m[1]) * (per + 1) + int(m[2])}.0.{_resnet(m[3])}"
        elif m := re.fullmatch(r"down_blocks\.(\d+)\.attentions\.(\d+)\.(.+)", key):
            new = f"input_blocks.{1 + int(m[1]) * (per + 1) + int(m[2])}.1.{m[3]}"
        elif m := re.fullmatch(r"down_blocks\.(\d+)\.downsamplers\.0\.conv\.(.+)", key):
            new = f"input_blocks.{(int(m[1]) + 1) * (per + 1)}.0.op.{m[2]}"
        elif m := re.fullmatch(r"mid_block\.resnets\.(\d+)\.(.+)", key):
            new = f"middle_block.{2 * int(m[1])}.{_resnet(m[2])}"
        elif m := re.fullmatch(r"mid_block\.attentions\.0\.(.+)", key):
            new = f"middle_block.1.{m[1]}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", key):
            new = f"output_blocks.{int(m[1]) * (per + 1) + int(m[2])}.0.{_resnet(m[3])}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.attentions\.(\d+)\.(.+)", key):
            new = f"output_blocks.{int(m[1]) * (per + 1) + int(m[2])}.1.{m[3]}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.upsamplers\.0\.conv\.(.+)", key):
            level = int(m[1])
            slot = 2 if attention_up[level] else 1
            new = f"output_blocks.{level * (per + 1) + per}.{slot}.conv.{m[2]}"
        else:
            raise ValueError(f"no original name for the UNet key {key!r}")
        out[new] = value.contiguous()
    return out


FORMAT = ModelFormat(
    what="diffusion model",
    title="Stable Diffusion UNet in the original (LDM) naming",
    library="diffusers",
    class_name="UNet2DConditionModel",
    recognize=is_ldm_unet,
    infer_config=infer_config,
    convert=from_ldm,
)
