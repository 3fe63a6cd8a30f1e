"""LTX-2.5's diffusion video VAE as one file (`vae/ltx-2.5-video-vae-bf16.safetensors`, what
ComfyUI's LTX-2.5 templates load with VAELoader), torch-free: its config mapped onto diffusers'
`LTX2VideoDiffusionDecoderModel`, and what it lacks.

Pinned from ComfyUI's source (comfyanonymous/ComfyUI `comfy/ldm/lightricks/vae/
na_diffusion_decoder.py`, and `comfy/sd.py`'s `VAE`, read in the zoidypuh/ComfyUI mirror):
- ComfyUI tells the file by `decoder.conv_in_x_t.weight` and builds `CausalDiffusionVAE` from
  the header's `__metadata__["config"]` JSON, its `"vae"` object: `"model_output_type"` and a
  `"decoder"` object of `NADiffusionDecoder`'s arguments (`in_channels`, `out_channels`,
  `patch_size`, `head_dim`, `stage_channels`, `stage_depths`, `stage_kernels`, `upsamples` as
  [stride, channel reduction] pairs, `stage5_kernel`, `t_emb_dim`,
  `timestep_scale_multiplier`, `default_num_inference_steps`), its defaults
  `LTX_24_VAE_CONFIG`'s; the encoder beside it is 2.3's conv encoder.
- Its keys are the module's own ("no rename pass is needed" there): `decoder.*` with a fused
  `attn.qkv`, `attn.proj`, `attn.q_norm`/`k_norm` and `t_embedder.mlp.{0,2}`, `encoder.*`, and
  `per_channel_statistics.*`.
The same file becomes diffusers' model as diffusers' own converter does it
(`scripts/convert_ltx2_to_diffusers.py`, `convert_ltx2_diffusion_video_vae`): the decoder half
only, the renames of `LTX_2_5_DIFFUSION_DECODER_RENAME_DICT`, the fused QKV split in three, the
statistics as `latents_mean`/`latents_std` (`diffusion_vae_load.py`). Gated layers
(`.gate_msa`, `.gate_mlp`, `.gate_ctx`, which ComfyUI's module has no place for) are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.files.header import HeaderError, read_metadata
from inline_core.diffusion.files.shapes import read_shapes

MARKER = "decoder.conv_in_x_t.weight"  # ComfyUI's `comfy/sd.py` tells the file by it
GATES = (".gate_msa", ".gate_mlp", ".gate_ctx")
STATISTICS = ("per_channel_statistics.mean-of-means", "per_channel_statistics.std-of-means")
# `LTX_24_VAE_CONFIG["decoder"]`: what ComfyUI builds where the file's config leaves a field.
DEFAULTS: dict[str, Any] = {
    "in_channels": 128,
    "out_channels": 3,
    "patch_size": 4,
    "head_dim": 64,
    "stage_channels": [2048, 1024, 512, 512, 256],
    "stage_depths": [4, 6, 4, 2, 8],
    "stage_kernels": [[3, 7, 7], [3, 7, 7], [3, 5, 5], [3, 5, 5], [11, 11, 11]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "stage5_kernel": [11, 11, 11],
    "t_emb_dim": 384,
    "timestep_scale_multiplier": 1000.0,
    "default_num_inference_steps": 1,
}
SHOWN = 4


class DiffusionVaeFileError(ValueError):
    """Why a diffusion video VAE file cannot be read."""


def is_diffusion_vae_file(path: Path) -> bool:
    shapes = read_shapes(path)
    return shapes is not None and MARKER in shapes


def diffusers_config(path: Path) -> dict[str, Any]:
    """The file's `LTX2VideoDiffusionDecoderModel` config; `DiffusionVaeFileError` saying what
    is wrong."""
    try:
        raw = read_metadata(path).get("config")
    except HeaderError as exc:
        raise DiffusionVaeFileError(str(exc)) from exc
    if raw is None:
        raise DiffusionVaeFileError("its header has no __metadata__['config'] (Lightricks' JSON)")
    try:
        data: object = json.loads(raw)
    except ValueError as exc:
        raise DiffusionVaeFileError(f"its __metadata__['config'] is not JSON: {exc}") from exc
    vae = cast(dict[str, Any], data).get("vae") if isinstance(data, dict) else None
    if not isinstance(vae, dict):
        raise DiffusionVaeFileError("its __metadata__['config'] has no 'vae' object")
    vae = cast(dict[str, Any], vae)
    given: object = vae.get("decoder") or {}
    if not isinstance(given, dict):
        raise DiffusionVaeFileError(
            "its __metadata__['config'] 'vae' has a 'decoder' not an object"
        )
    dec = {
        name: cast(dict[str, Any], given).get(name, default) for name, default in DEFAULTS.items()
    }
    try:
        return _mapped(dec, str(vae.get("model_output_type", "x0")))
    except (TypeError, ValueError, IndexError) as exc:  # a field of another shape than ComfyUI's
        raise DiffusionVaeFileError(
            f"its __metadata__['config'] 'vae' has a 'decoder' that is not ComfyUI's "
            f"NADiffusionDecoder's ({type(exc).__name__}: {exc})"
        ) from exc


def _mapped(dec: dict[str, Any], output_type: str) -> dict[str, Any]:
    """ComfyUI's decoder arguments `dec` as diffusers' config."""
    det = len(dec["stage_channels"]) - 1  # the deterministic stages before the diffusion one
    strides = [tuple(stride) for stride, _ in dec["upsamples"]]
    temporal = spatial = 1
    for t, h, _w in strides:
        temporal, spatial = temporal * t, spatial * h
    return {
        "out_channels": dec["out_channels"],
        "latent_channels": dec["in_channels"],
        "patch_size": dec["patch_size"],
        "decoder_head_dim": dec["head_dim"],
        "decoder_stage_channels": tuple(dec["stage_channels"]),
        "decoder_stage_depths": tuple(dec["stage_depths"]),
        "decoder_stage_kernels": tuple(tuple(k) for k in dec["stage_kernels"][:det]),
        "decoder_upsample_strides": tuple(strides),
        "decoder_upsample_channel_reductions": tuple(r for _, r in dec["upsamples"]),
        "decoder_stage5_kernel": tuple(dec["stage5_kernel"]),
        "decoder_t_emb_dim": dec["t_emb_dim"],
        "decoder_timestep_scale_multiplier": float(dec["timestep_scale_multiplier"]),
        "decoder_model_output_type": output_type,
        "decoder_num_inference_steps": dec["default_num_inference_steps"],
        "spatial_compression_ratio": spatial * int(dec["patch_size"]),
        "temporal_compression_ratio": temporal,
    }


def problem(path: Path) -> str | None:
    """Why LTX-2.5's decoder cannot be read from this file (None: it can)."""
    try:
        diffusers_config(path)
    except DiffusionVaeFileError as exc:
        return str(exc)
    shapes = read_shapes(path) or {}
    gated = [k for k in shapes if k.endswith(GATES)]
    if gated:
        return f"its layers {', '.join(gated[:SHOWN])} are gated, which ComfyUI's decoder is not"
    missing = [k for k in STATISTICS if k not in shapes]
    if missing:
        return f"it lacks {', '.join(missing)}"
    return None
