"""Key naming between diffusers and the original (ComfyUI) single-file layouts.

Loading goes original -> diffusers with diffusers' own converters; the kit goes the other way to
write files in the naming ComfyUI users have, and the round trip is tested.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

import torch

from inline_core.components.diffusers_zimage.libs import module
from inline_core.models.zimage.infer import (
    QWEN_PREFIXES,
    TRANSFORMER_PREFIXES,
    strip_prefix,
)

StateDict = dict[str, torch.Tensor]

_TRANSFORMER_TO_ORIGINAL = (
    ("all_final_layer.2-1.", "final_layer."),
    ("all_x_embedder.2-1.", "x_embedder."),
    (".attention.to_out.0.", ".attention.out."),
    (".attention.norm_k.", ".attention.k_norm."),
    (".attention.norm_q.", ".attention.q_norm."),
)


def _shapes(sd: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in sd.items()}


def transformer_to_original(sd: Mapping[str, torch.Tensor]) -> StateDict:
    """Diffusers `ZImageTransformer2DModel` keys -> the original checkpoint's (fused qkv)."""
    out: StateDict = {}
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
        for old, repl in _TRANSFORMER_TO_ORIGINAL:
            new = new.replace(old, repl)
        out[new] = value
    return out


def transformer_from_original(sd: StateDict) -> StateDict:
    """Original (optionally `model.diffusion_model.`-prefixed) or diffusers keys -> diffusers."""
    utils = module("diffusers.loaders.single_file_utils")
    convert = utils.convert_z_image_transformer_checkpoint_to_diffusers
    prefix, _ = strip_prefix(_shapes(sd), TRANSFORMER_PREFIXES)
    if prefix:
        sd = {k[len(prefix) :]: v for k, v in sd.items()}
    if "all_x_embedder.2-1.weight" in sd:  # already diffusers naming
        return sd
    return cast(StateDict, convert(sd))


def _vae_block_to_ldm(rest: str) -> str:
    return rest.replace("conv_shortcut", "nin_shortcut")


_ATTN_TO_LDM = {
    "group_norm": "norm",
    "to_q": "q",
    "to_k": "k",
    "to_v": "v",
    "to_out.0": "proj_out",
}


def vae_to_ldm(sd: Mapping[str, torch.Tensor], n_blocks: int) -> StateDict:
    """Diffusers `AutoencoderKL` keys -> LDM naming (FLUX `ae.safetensors`, as ComfyUI has it)."""
    out: StateDict = {}
    for key, value in sd.items():
        side, _, rest = key.partition(".")
        new: str | None = None
        if m := re.fullmatch(r"down_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", rest):
            new = f"down.{m[1]}.block.{m[2]}.{_vae_block_to_ldm(m[3])}"
        elif m := re.fullmatch(r"down_blocks\.(\d+)\.downsamplers\.0\.(.+)", rest):
            new = f"down.{m[1]}.downsample.{m[2]}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", rest):
            new = f"up.{n_blocks - 1 - int(m[1])}.block.{m[2]}.{_vae_block_to_ldm(m[3])}"
        elif m := re.fullmatch(r"up_blocks\.(\d+)\.upsamplers\.0\.(.+)", rest):
            new = f"up.{n_blocks - 1 - int(m[1])}.upsample.{m[2]}"
        elif m := re.fullmatch(r"mid_block\.resnets\.(\d+)\.(.+)", rest):
            new = f"mid.block_{int(m[1]) + 1}.{_vae_block_to_ldm(m[2])}"
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


def vae_from_ldm(sd: StateDict, config: Mapping[str, Any]) -> StateDict:
    convert = module("diffusers.loaders.single_file_utils").convert_ldm_vae_checkpoint
    return cast(StateDict, convert(sd, dict(config)))


def qwen3_from_single(sd: StateDict) -> StateDict:
    """A single-file Qwen3 (`model.`-prefixed causal-LM naming or bare) -> `Qwen3Model` keys."""
    body = {k: v for k, v in sd.items() if not k.startswith("lm_head.")}
    prefix, _ = strip_prefix(_shapes(body), QWEN_PREFIXES)
    return {k[len(prefix) :]: v for k, v in body.items()}
