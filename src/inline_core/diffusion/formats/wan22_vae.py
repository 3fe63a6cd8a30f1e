"""The Wan 2.2 VAE (`wan2.2_vae.safetensors`): the 48-channel layout of the Wan VAE format.

The encoder and decoder blocks are residual (a block's resnets and its resampler in one numbered
sequence, `downsamples.{i}.downsamples.{j}`), the pixels are patchified 2x2 before the encoder
(12 channels in and out), and the latents are 16x down in space. diffusers' single-file converter
knows only the Wan 2.1 layout, so this file renames both ways itself (the round trip is tested).
A single file carries no latent statistics: the published ones (Wan2.2-TI2V-5B's) come with a
48-channel file. `wan_vae.FORMAT` dispatches here for files of this layout.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, shape_of

MARKER = "decoder.upsamples.0.upsamples.0.residual.0.gamma"  # a nested (residual) up block
LATENT_CHANNELS = 48
DIM_MULT = [1, 2, 4, 4]
# Wan2.2-TI2V-5B's per-channel latent statistics (its diffusers VAE config).
LATENTS_MEAN = [
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542,
    0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109,
    0.2665, -0.2108, -0.2158, 0.2502, -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899,
    -0.2799, -0.1230, -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
    0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667,
]  # fmt: skip
LATENTS_STD = [
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013, 0.8158, 1.0344,
    0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804,
    0.5833, 1.4146, 0.8986, 0.5659, 0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999,
    0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
    0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744,
]  # fmt: skip

# A residual block's pieces: original -> diffusers.
_RESIDUAL = (
    ("residual.0.gamma", "norm1.gamma"),
    ("residual.2.", "conv1."),
    ("residual.3.gamma", "norm2.gamma"),
    ("residual.6.", "conv2."),
    ("shortcut.", "conv_shortcut."),
)
_HEAD = (("conv1.", "conv_in."), ("head.0.gamma", "norm_out.gamma"), ("head.2.", "conv_out."))
_QUANT = {"conv1.": "quant_conv.", "conv2.": "post_quant_conv."}
_SIDE = {"encoder": ("downsamples", "down_blocks", "downsampler"),
         "decoder": ("upsamples", "up_blocks", "upsampler")}  # fmt: skip


def is_wan22_layout(shapes: Mapping[str, object]) -> bool:
    return MARKER in shapes


def _blocks(shapes: Shapes, side: str) -> dict[int, set[int]]:
    """Block index -> the indices of its numbered pieces, in original naming."""
    name = _SIDE[side][0]
    found: dict[int, set[int]] = {}
    for key in shapes:
        if m := re.match(rf"{side}\.{name}\.(\d+)\.{name}\.(\d+)\.", key):
            found.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    return found


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`AutoencoderKLWan` kwargs for an original-naming Wan 2.2 VAE file."""
    base_dim, in_channels = shape_of(shapes, "encoder.conv1.weight")[:2]
    z_dim = shape_of(shapes, "conv2.weight")[0]
    if z_dim != LATENT_CHANNELS:
        raise ConfigInferenceError(
            f"a Wan 2.2 layout VAE with {z_dim} latent channels, not the published "
            f"{LATENT_CHANNELS}"
        )
    patch = math.isqrt(in_channels // 3)
    if patch * patch * 3 != in_channels:
        raise ConfigInferenceError(f"{in_channels} input channels are not 3 x a square patch")
    encoder = _blocks(shapes, "encoder")
    if len(encoder) != len(DIM_MULT) or len(_blocks(shapes, "decoder")) != len(DIM_MULT):
        raise ConfigInferenceError(f"the Wan 2.2 VAE has {len(DIM_MULT)} levels each way")
    res_blocks = sum(
        f"encoder.downsamples.0.downsamples.{j}.residual.2.weight" in shapes
        for j in sorted(encoder[0])
    )
    widths = [
        shape_of(shapes, f"encoder.downsamples.{i}.downsamples.0.residual.2.weight")[0]
        for i in range(len(DIM_MULT))
    ]
    if [w // base_dim for w in widths] != DIM_MULT:
        raise ConfigInferenceError(f"encoder widths {widths} are not {DIM_MULT} x {base_dim}")
    temporal = [
        f"encoder.downsamples.{i}.downsamples.{res_blocks}.time_conv.weight" in shapes
        for i in range(len(DIM_MULT) - 1)
    ]
    return {
        "base_dim": base_dim,
        "decoder_base_dim": shape_of(shapes, "decoder.conv1.weight")[0] // DIM_MULT[-1],
        "z_dim": z_dim,
        "dim_mult": list(DIM_MULT),
        "num_res_blocks": res_blocks,
        "attn_scales": [],
        "temperal_downsample": temporal,
        "is_residual": True,
        "in_channels": in_channels,
        "out_channels": shape_of(shapes, "decoder.head.2.weight")[0],
        "patch_size": patch,
        "scale_factor_spatial": 2 ** (len(DIM_MULT) - 1) * patch,
        "scale_factor_temporal": 2 ** sum(temporal),
        "latents_mean": list(LATENTS_MEAN),
        "latents_std": list(LATENTS_STD),
    }


def _rename(rest: str, table: tuple[tuple[str, str], ...], forward: bool) -> str | None:
    for old, new in table:
        a, b = (old, new) if forward else (new, old)
        if rest.startswith(a):
            return b + rest[len(a) :]
    return None


def _diffusers_key(key: str) -> str:
    if not key.startswith(("encoder.", "decoder.")):
        for old, new in _QUANT.items():
            if key.startswith(old):
                return new + key[len(old) :]
        raise ValueError(f"unknown Wan 2.2 VAE key {key!r}")
    side, rest = key.split(".", 1)
    numbered, blocks, sampler = _SIDE[side]
    if (renamed := _rename(rest, _HEAD, True)) is not None:
        return f"{side}.{renamed}"
    if m := re.match(r"middle\.([02])\.(.*)", rest):
        return f"{side}.mid_block.resnets.{int(m.group(1)) // 2}.{_residual(m.group(2), True)}"
    if m := re.match(r"middle\.1\.(.*)", rest):
        return f"{side}.mid_block.attentions.0.{m.group(1)}"
    if m := re.match(rf"{numbered}\.(\d+)\.{numbered}\.(\d+)\.(.*)", rest):
        i, j, inner = m.groups()
        if inner.startswith(("resample.", "time_conv.")):
            return f"{side}.{blocks}.{i}.{sampler}.{inner}"
        return f"{side}.{blocks}.{i}.resnets.{j}.{_residual(inner, True)}"
    raise ValueError(f"unknown Wan 2.2 VAE key {key!r}")


def _residual(rest: str, forward: bool) -> str:
    renamed = _rename(rest, _RESIDUAL, forward)
    if renamed is None:
        raise ValueError(f"unknown residual key {rest!r}")
    return renamed


def from_original(sd: dict[str, Any]) -> dict[str, Any]:
    """Original keys -> `AutoencoderKLWan`'s."""
    return {_diffusers_key(k): v for k, v in sd.items()}


def to_original(sd: Mapping[str, Any]) -> dict[str, Any]:
    """`AutoencoderKLWan` keys -> the Wan 2.2 repository's (what ComfyUI's file holds)."""
    resnets: dict[tuple[str, str], int] = {}  # (side, block): its resnet count
    for key in sd:
        if m := re.match(r"(encoder|decoder)\.(?:down|up)_blocks\.(\d+)\.resnets\.(\d+)\.", key):
            slot = (m.group(1), m.group(2))
            resnets[slot] = max(resnets.get(slot, 0), int(m.group(3)) + 1)
    out: dict[str, Any] = {}
    for key, value in sd.items():
        out[_original_key(key, resnets)] = value
    return out


def _original_key(key: str, resnets: Mapping[tuple[str, str], int]) -> str:
    for old, new in _QUANT.items():
        if key.startswith(new):
            return old + key[len(new) :]
    side, rest = key.split(".", 1)
    numbered, blocks, sampler = _SIDE[side]
    if (renamed := _rename(rest, _HEAD, False)) is not None:
        return f"{side}.{renamed}"
    if m := re.match(r"mid_block\.resnets\.(\d)\.(.*)", rest):
        return f"{side}.middle.{2 * int(m.group(1))}.{_residual(m.group(2), False)}"
    if m := re.match(r"mid_block\.attentions\.0\.(.*)", rest):
        return f"{side}.middle.1.{m.group(1)}"
    if m := re.match(rf"{blocks}\.(\d+)\.resnets\.(\d+)\.(.*)", rest):
        i, j, inner = m.groups()
        return f"{side}.{numbered}.{i}.{numbered}.{j}.{_residual(inner, False)}"
    if m := re.match(rf"{blocks}\.(\d+)\.{sampler}\.(.*)", rest):
        i, inner = m.groups()
        return f"{side}.{numbered}.{i}.{numbered}.{resnets[(side, i)]}.{inner}"
    raise ValueError(f"unknown Wan 2.2 VAE key {key!r}")
