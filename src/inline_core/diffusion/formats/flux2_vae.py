"""FLUX.2's autoencoder (`AutoencoderKLFlux2`; ComfyUI's `flux2-vae.safetensors`) in one place.

The LDM naming of FLUX's VAE with 32 latent channels, its quant convs inside the encoder and
decoder (`encoder.quant_conv`, `decoder.post_quant_conv`) and a batch norm (`bn.*`) whose running
statistics normalise the 2x2-patchified latents. Recognised from a safetensors header
(torch-free), configured from its shapes, renamed to diffusers' keys with diffusers' own LDM
converter (loading) or back to the file's naming (the kit; the round trip is tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inline_core.diffusion.files.shapes import Shapes, shape_of, strip_prefix
from inline_core.diffusion.formats import ldm_vae
from inline_core.diffusion.formats.format import ModelFormat

if TYPE_CHECKING:
    import torch

CLASS_NAME = "AutoencoderKLFlux2"
LATENT_CHANNELS = 32  # before the 2x2 patch: 128 channels reach the transformer
BATCH_NORM_EPS = 1e-4  # diffusers' default for FLUX.2 (not in the file)
_NESTED = {"encoder.quant_conv.": "quant_conv.", "decoder.post_quant_conv.": "post_quant_conv."}


def is_flux2_vae(shapes: Shapes) -> bool:
    _prefix, s = strip_prefix(shapes, ldm_vae.PREFIXES)
    return ldm_vae.is_ldm_vae(s) and "bn.running_mean" in s


def batch_norm_channels(shapes: Shapes) -> int:
    _prefix, s = strip_prefix(shapes, ldm_vae.PREFIXES)
    return shape_of(s, "bn.running_mean")[0]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """An `AutoencoderKLFlux2` config from the file's shapes."""
    _prefix, s = strip_prefix(shapes, ldm_vae.PREFIXES)
    flat = {_unnested(k): v for k, v in s.items()}
    base = ldm_vae.infer_config(flat)
    drop = ("scaling_factor", "shift_factor")
    config = {k: v for k, v in base.items() if k not in drop}
    config["batch_norm_eps"] = BATCH_NORM_EPS
    config["patch_size"] = [2, 2]
    return config


def _unnested(key: str) -> str:
    for nested, top in _NESTED.items():
        if key.startswith(nested):
            return top + key[len(nested) :]
    return key


def from_file(sd: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The file's keys -> diffusers' `AutoencoderKLFlux2` keys."""
    prefix, _ = strip_prefix({k: tuple(v.shape) for k, v in sd.items()}, ldm_vae.PREFIXES)
    flat = {_unnested(k[len(prefix) :]): v for k, v in sd.items()}
    norm = {k: v for k, v in flat.items() if k.startswith("bn.")}
    rest = {k: v for k, v in flat.items() if not k.startswith("bn.")}
    return dict(ldm_vae.from_ldm(rest, config)) | norm  # its quant convs included


def to_file(sd: Mapping[str, torch.Tensor], n_blocks: int) -> dict[str, torch.Tensor]:
    """Diffusers' `AutoencoderKLFlux2` keys -> the file's (as ComfyUI has it)."""
    inner = {
        k: v for k, v in sd.items() if not k.startswith(("bn.", "quant_conv.", "post_quant_conv."))
    }
    out = ldm_vae.to_ldm(inner, n_blocks)
    for key, value in sd.items():
        if key.startswith("bn."):
            out[key] = value.contiguous()
        elif key.startswith(("quant_conv.", "post_quant_conv.")):
            side = "encoder." if key.startswith("quant_conv.") else "decoder."
            out[side + key] = value.contiguous()
    return out


FORMAT = ModelFormat(
    what="vae",
    title="FLUX.2 VAE",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_flux2_vae,
    infer_config=infer_config,
    convert=from_file,
)
