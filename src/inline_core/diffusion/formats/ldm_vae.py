"""The LDM-named autoencoder (FLUX's `ae.safetensors`, ComfyUI's `vae/` files), in one place.

Recognised from a safetensors header (torch-free), its `AutoencoderKL` config inferred from tensor
shapes, and its keys converted to diffusers' naming with diffusers' own converter (loading) or back
to LDM naming (the kit writes files in the naming ComfyUI users have; the round trip is tested).
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

PREFIXES = ("first_stage_model.", "vae.")
# FLUX VAE latent normalisation; not stored in ae.safetensors.
FLUX_SCALING = 0.3611
FLUX_SHIFT = 0.1159
FLUX_LATENT_CHANNELS = 16
# ComfyUI's LDM VAE always builds GroupNorm(32, C): a file in that naming implies 32 groups.
NORM_GROUPS = 32


def is_ldm_vae(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return (
        "encoder.conv_in.weight" in s
        and "decoder.conv_out.weight" in s
        and any(k.startswith("encoder.down.") for k in s)
    )


def is_diffusers_vae(shapes: Shapes) -> bool:
    return "encoder.conv_in.weight" in shapes and any(
        k.startswith("encoder.down_blocks.") for k in shapes
    )


def latent_channels(shapes: Shapes) -> int:
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return shape_of(s, "encoder.conv_out.weight")[0] // 2


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """An `AutoencoderKL` config for an LDM-named VAE such as FLUX's `ae.safetensors`."""
    _prefix, s = strip_prefix(shapes, PREFIXES)
    n_blocks = count_blocks(s, r"encoder\.down\.(\d+)\.")
    if n_blocks == 0:
        raise ConfigInferenceError("no encoder blocks found")
    channels = [shape_of(s, f"encoder.down.{i}.block.0.conv1.weight")[0] for i in range(n_blocks)]
    if any(c % NORM_GROUPS for c in channels):
        raise ConfigInferenceError(f"channels {channels} do not fit {NORM_GROUPS} norm groups")
    latents = shape_of(s, "encoder.conv_out.weight")[0] // 2
    flux_like = latents == FLUX_LATENT_CHANNELS
    return {
        "in_channels": shape_of(s, "encoder.conv_in.weight")[1],
        "out_channels": shape_of(s, "decoder.conv_out.weight")[0],
        "down_block_types": ["DownEncoderBlock2D"] * n_blocks,
        "up_block_types": ["UpDecoderBlock2D"] * n_blocks,
        "block_out_channels": channels,
        "layers_per_block": count_blocks(s, r"encoder\.down\.0\.block\.(\d+)\."),
        "act_fn": "silu",
        "latent_channels": latents,
        "norm_num_groups": NORM_GROUPS,
        "sample_size": 1024,
        "scaling_factor": FLUX_SCALING if flux_like else 0.18215,
        "shift_factor": FLUX_SHIFT if flux_like else None,
        "use_quant_conv": "quant_conv.weight" in s,
        "use_post_quant_conv": "post_quant_conv.weight" in s,
        "mid_block_add_attention": "encoder.mid.attn_1.q.weight" in s,
    }


def spatial_factor(config: Mapping[str, Any]) -> int | None:
    """Pixels per latent cell along a side: 2 per down block after the first."""
    channels: object = config.get("block_out_channels")
    if not isinstance(channels, list) or not channels:
        return None
    return 2 ** (len(cast(list[object], channels)) - 1)


# -- key naming (imports torch) --------------------------------------------------------------------


def from_ldm(sd: StateDict, config: Mapping[str, Any]) -> StateDict:
    """LDM keys -> diffusers `AutoencoderKL` keys, with diffusers' own converter."""
    from inline_core.diffusion.libs import module

    convert = module("diffusers.loaders.single_file_utils").convert_ldm_vae_checkpoint
    return cast("StateDict", convert(sd, dict(config)))


_ATTN_TO_LDM = {
    "group_norm": "norm",
    "to_q": "q",
    "to_k": "k",
    "to_v": "v",
    "to_out.0": "proj_out",
}


def _block_to_ldm(rest: str) -> str:
    return rest.replace("conv_shortcut", "nin_shortcut")


def to_ldm(sd: Mapping[str, torch.Tensor], n_blocks: int) -> StateDict:
    """Diffusers `AutoencoderKL` keys -> LDM naming (FLUX `ae.safetensors`, as ComfyUI has it)."""
    out: StateDict = {}
    for key, value in sd.items():
        side, _, rest = key.partition(".")
        new: str
        if m := re.fullmatch(r"down_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", rest):
            new = f"down.{m[1]}.block.{m[2]}.{_block_to_ldm(m[3])}"
        elif m := re.fullmatch(r"down_blocks\.(\d+)\.downsamplers\.0\.(.+)", rest):
            new = f"down.{m[1]}.downsample.{m[2]}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", rest):
            new = f"up.{n_blocks - 1 - int(m[1])}.block.{m[2]}.{_block_to_ldm(m[3])}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.upsamplers\.0\.(.+)", rest):
            new = f"up.{n_blocks - 1 - int(m[1])}.upsample.{m[2]}"
        elif m := re.fullmatch(r"mid_block\.resnets\.(\d+)\.(.+)", rest):
            new = f"mid.block_{int(m[1]) + 1}.{_block_to_ldm(m[2])}"
        elif m := re.fullmatch(r"mid_block\.attentions\.0\.(.+)\.(weight|bias)", rest):
            new = f"mid.attn_1.{_ATTN_TO_LDM[m[1]]}.{m[2]}"
            if m[2] == "weight" and m[1] != "group_norm":
                value = value[:, :, None, None]  # LDM attention projections are 1x1 convs
        elif rest.startswith("conv_norm_out."):
            new = rest.replace("conv_norm_out.", "norm_out.")
        else:
            new = rest
        out[f"{side}.{new}"] = value.contiguous()
    return out


FORMAT = ModelFormat(
    what="vae",
    title="VAE in the FLUX/ComfyUI (LDM) key naming",
    library="diffusers",
    class_name="AutoencoderKL",
    recognize=is_ldm_vae,
    infer_config=infer_config,
    convert=from_ldm,
)
