"""Lightricks' latent upsampler as one file (`latent_upscale_models/ltx-2-spatial-upscaler-x2-*
.safetensors`, what ComfyUI's `LatentUpscaleModelLoader` reads), torch-free.

The file holds the weights under the names diffusers' `LTX2LatentUpsamplerModel` uses (both
keep Lightricks' module names), and its config as Lightricks' JSON in the header's
`__metadata__["config"]`, which ComfyUI reads too: `FIELDS` maps it onto diffusers' config,
with Lightricks' defaults for a field it leaves out (a plain pixel shuffle, not the rational
resampler diffusers defaults to). The two-stage path reads a spatial x2 upsampler; a temporal
one, or a file without its config or with keys missing, is a 422 naming it at submit. Which
LTX-2 version it was made for: `upsampler_version.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.files.header import HeaderError, read_metadata
from inline_core.diffusion.files.shapes import count_blocks, read_shapes

PROBE = "post_upsample_res_blocks.0.conv2.bias"  # ComfyUI's loader tells the file by it
# Lightricks' field -> (diffusers' field, Lightricks' default).
FIELDS: dict[str, tuple[str, Any]] = {
    "in_channels": ("in_channels", 128),
    "mid_channels": ("mid_channels", 512),
    "num_blocks_per_stage": ("num_blocks_per_stage", 4),
    "dims": ("dims", 3),
    "spatial_upsample": ("spatial_upsample", True),
    "temporal_upsample": ("temporal_upsample", False),
    "spatial_scale": ("rational_spatial_scale", 2.0),
    "rational_resampler": ("use_rational_resampler", False),
}
BLOCK_KEYS = tuple(
    f"{layer}{i}.{p}" for i in (1, 2) for layer in ("conv", "norm") for p in ("weight", "bias")
)
TOP_KEYS = ("initial_conv.weight", "initial_norm.weight", "final_conv.weight")
# The x2 layer's weights: the rational resampler's (LTX-2.0's) or a plain conv's (2.3's).
LAYER_KEYS = {True: ("upsampler.conv.weight",), False: ("upsampler.0.weight",)}
SHOWN = 4


class UpsamplerFileError(ValueError):
    """Why a latent upsampler file cannot be read."""


def is_upsampler_file(path: Path) -> bool:
    shapes = read_shapes(path)
    return shapes is not None and PROBE in shapes


def diffusers_config(path: Path) -> dict[str, Any]:
    """The file's `LTX2LatentUpsamplerModel` config; `UpsamplerFileError` saying what is wrong."""
    try:
        raw = read_metadata(path).get("config")
    except HeaderError as exc:
        raise UpsamplerFileError(str(exc)) from exc
    if raw is None:
        raise UpsamplerFileError("its header has no __metadata__['config'] (Lightricks' JSON)")
    try:
        data: object = json.loads(raw)
    except ValueError as exc:
        raise UpsamplerFileError(f"its __metadata__['config'] is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UpsamplerFileError("its __metadata__['config'] is not a JSON object")
    given = cast(dict[str, Any], data)
    given = cast(dict[str, Any], given.get("upsampler", given))  # some nest it
    config = {name: given.get(field, default) for field, (name, default) in FIELDS.items()}
    if not config["spatial_upsample"] or config["temporal_upsample"]:
        raise UpsamplerFileError(
            "it upsamples in time (a temporal upscaler): the two-stage path takes the spatial "
            "x2 one (ltx-2-spatial-upscaler-x2-*)"
        )
    if float(config["rational_spatial_scale"]) != 2.0:
        raise UpsamplerFileError(
            f"it scales by {config['rational_spatial_scale']}: the two-stage path takes x2"
        )
    return config


def problem(path: Path) -> str | None:
    """Why the two-stage path cannot read this file (None: it can)."""
    try:
        config = diffusers_config(path)
    except UpsamplerFileError as exc:
        return str(exc)
    shapes = read_shapes(path) or {}
    blocks = int(config["num_blocks_per_stage"])
    wanted = [
        *TOP_KEYS,
        *LAYER_KEYS[bool(config["use_rational_resampler"])],
        *(
            f"{stage}.{i}.{key}"
            for stage in ("res_blocks", "post_upsample_res_blocks")
            for i in range(blocks)
            for key in BLOCK_KEYS
        ),
    ]
    missing = [k for k in wanted if k not in shapes]
    if missing:
        more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        return f"it lacks {', '.join(missing[:SHOWN])}{more}"
    if count_blocks(shapes, r"res_blocks\.(\d+)\.") != blocks:
        return f"its blocks are not the {blocks} per stage its config states"
    return None
