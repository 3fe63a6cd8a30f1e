"""The Wan VAE (`wan_2.1_vae.safetensors`, `wan2.2_vae.safetensors`, or an `AutoencoderKLWan`
folder): one format, two layouts.

A causal 3D autoencoder, 4x down in time (the first frame alone, then four per latent frame). Wan
2.1's has 16 latent channels and is 8x down in space; Wan 2.2's (the 5B's) has 48, is 16x down,
and has its own layout (`wan22_vae.py`, which this format dispatches to). Recognised from a single
file's header (torch-free), its config inferred from tensor shapes, its original (Wan repository /
ComfyUI) keys renamed with diffusers' own converter; `to_original` writes that naming back (the
kit's ComfyUI file; the round trip is tested). The 2.1 converter knows the published layout only
(four levels, two residual blocks each), so a file of another layout is refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, shape_of
from inline_core.diffusion.formats import wan22_vae
from inline_core.diffusion.formats.format import ModelFormat

if TYPE_CHECKING:
    import torch

CLASS_NAME = "AutoencoderKLWan"
MARKER = "decoder.middle.0.residual.0.gamma"  # diffusers' own single-file test
LATENT_CHANNELS = 16
TEMPORAL_FACTOR = 4
SPATIAL_FACTOR = 8
# What `AutoencoderKLWan` decodes to: floats in (-1, 1) (spec 003's `chunk_value_range`).
VALUE_RANGE = (-1.0, 1.0)
DIM_MULT = [1, 2, 4, 4]
RES_BLOCKS = 2
UPSAMPLES = len(DIM_MULT) * (RES_BLOCKS + 1) + len(DIM_MULT) - 1  # 15 numbered decoder blocks
# Wan 2.1's per-channel latent statistics (`AutoencoderKLWan`'s defaults, which its files take:
# a single file carries none). Wan 2.2's are `wan22_vae.LATENTS_MEAN` / `LATENTS_STD`.
LATENTS_MEAN = [
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
]  # fmt: skip
LATENTS_STD = [
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
]  # fmt: skip


def is_wan_vae(shapes: Shapes) -> bool:
    return MARKER in shapes and "encoder.conv1.weight" in shapes and "conv2.weight" in shapes


def latent_channels(shapes: Shapes) -> int:
    return shape_of(shapes, "conv2.weight")[0]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`AutoencoderKLWan` kwargs from an original-naming file (either layout)."""
    if wan22_vae.is_wan22_layout(shapes):
        return wan22_vae.infer_config(shapes)
    base_dim = shape_of(shapes, "encoder.conv1.weight")[0]
    z_dim = latent_channels(shapes)
    if shape_of(shapes, "decoder.conv1.weight")[1] != z_dim:
        raise ConfigInferenceError("decoder input width differs from the latent channels")
    blocks = {int(m.group(1)) for k in shapes if (m := re.match(r"decoder\.upsamples\.(\d+)\.", k))}
    if len(blocks) != UPSAMPLES:
        raise ConfigInferenceError(
            f"{len(blocks)} decoder blocks, not the Wan 2.1 VAE's {UPSAMPLES} nor the Wan 2.2 "
            "VAE's residual layout (another layout is not supported)"
        )
    widths = [
        shape_of(shapes, f"encoder.downsamples.{i * 3}.residual.2.weight")[0] for i in range(4)
    ]
    if [w // base_dim for w in widths] != DIM_MULT:
        raise ConfigInferenceError(f"encoder widths {widths} are not {DIM_MULT} x {base_dim}")
    return {
        "base_dim": base_dim,
        "z_dim": z_dim,
        "dim_mult": list(DIM_MULT),
        "num_res_blocks": RES_BLOCKS,
        "attn_scales": [],
        "temperal_downsample": [False, True, True],
    }


def from_original(sd: dict[str, Any], _config: Mapping[str, Any]) -> dict[str, Any]:
    """Original keys -> `AutoencoderKLWan`'s (diffusers' converter); diffusers keys stay."""
    from inline_core.diffusion.libs import module

    if MARKER not in sd:
        return sd
    if wan22_vae.is_wan22_layout(sd):
        return wan22_vae.from_original(sd)
    convert = module("diffusers.loaders.single_file_utils")
    return cast(dict[str, Any], convert.convert_wan_vae_to_diffusers(sd))


# -- diffusers -> original (the kit) ---------------------------------------------------------------

_RESIDUAL = {"norm1.gamma": "0.gamma", "conv1": "2", "norm2.gamma": "3.gamma", "conv2": "6"}
_HEADS = {"norm_out.gamma": "head.0.gamma", "conv_out": "head.2", "conv_in": "conv1"}


def _residual(rest: str) -> str:
    for new, old in _RESIDUAL.items():
        if rest.startswith(new):
            return f"residual.{old}{rest[len(new) :]}"
    if rest.startswith("conv_shortcut"):
        return f"shortcut{rest[len('conv_shortcut') :]}"
    raise ValueError(f"unknown residual key {rest!r}")


def _original_key(key: str) -> str:
    if key.startswith("quant_conv."):
        return "conv1." + key[len("quant_conv.") :]
    if key.startswith("post_quant_conv."):
        return "conv2." + key[len("post_quant_conv.") :]
    side, rest = key.split(".", 1)
    for new, old in _HEADS.items():
        if rest.startswith(new):
            return f"{side}.{old}{rest[len(new) :]}"
    if m := re.match(r"mid_block\.resnets\.(\d+)\.(.*)", rest):
        return f"{side}.middle.{2 * int(m.group(1))}.{_residual(m.group(2))}"
    if m := re.match(r"mid_block\.attentions\.0\.(.*)", rest):
        return f"{side}.middle.1.{m.group(1)}"
    if m := re.match(r"down_blocks\.(\d+)\.(.*)", rest):
        inner = m.group(2)
        if not inner.startswith(("resample", "time_conv")):
            inner = _residual(inner)
        return f"{side}.downsamples.{m.group(1)}.{inner}"
    if m := re.match(r"up_blocks\.(\d+)\.resnets\.(\d+)\.(.*)", rest):
        index = (RES_BLOCKS + 2) * int(m.group(1)) + int(m.group(2))
        return f"{side}.upsamples.{index}.{_residual(m.group(3))}"
    if m := re.match(r"up_blocks\.(\d+)\.upsamplers\.0\.(.*)", rest):
        index = (RES_BLOCKS + 2) * int(m.group(1)) + RES_BLOCKS + 1
        return f"{side}.upsamples.{index}.{m.group(2)}"
    raise ValueError(f"unknown Wan VAE key {key!r}")


def to_original(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`AutoencoderKLWan` keys -> the Wan repository's (what ComfyUI's file holds)."""
    return {_original_key(k): v for k, v in sd.items()}


FORMAT = ModelFormat(
    what="vae",
    title="Wan VAE",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_wan_vae,
    infer_config=infer_config,
    convert=from_original,
)
