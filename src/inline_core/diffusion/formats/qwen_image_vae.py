"""The Qwen-Image VAE (`vae/qwen_image_vae.safetensors`, or an `AutoencoderKLQwenImage` folder).

Qwen-Image's VAE is the Wan 2.1 video VAE with its image decoder fine-tuned: the same layout and
key names (ComfyUI's file keeps the Wan repository's naming, which ComfyUI loads as a Wan VAE),
16 latent channels, 8x down in space, Wan 2.1's latent statistics. Families that render through
it (Qwen-Image, Krea 2) build diffusers' `AutoencoderKLQwenImage`, whose state keys are
`AutoencoderKLWan`'s, so the renaming is the Wan format's (`wan_vae.from_original` /
`to_original`, tested round trip). A header cannot tell this file from `wan_2.1_vae.safetensors`
(same shapes): it is recognised as that layout, and a family's rule table prefers it by name.
Qwen-Image-Layered's RGBA VAE is the same layout with four input channels, read from the header.
Torch-free at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, shape_of
from inline_core.diffusion.formats import wan22_vae, wan_vae
from inline_core.diffusion.formats.format import ModelFormat

if TYPE_CHECKING:
    import torch

CLASS_NAME = "AutoencoderKLQwenImage"
LATENT_CHANNELS = wan_vae.LATENT_CHANNELS
SPATIAL_FACTOR = wan_vae.SPATIAL_FACTOR
# What `AutoencoderKLQwenImage` decodes to: floats in (-1, 1).
VALUE_RANGE = wan_vae.VALUE_RANGE
# `AutoencoderKLQwenImage`'s defaults, which a single file takes (it carries none): Wan 2.1's.
LATENTS_MEAN = wan_vae.LATENTS_MEAN
LATENTS_STD = wan_vae.LATENTS_STD
# The name families share its loaded weights under (a builder's `shared_parts`): one Qwen-Image
# VAE file on one placement is loaded once for every family that decodes with it.
SHARED = "qwen-image-vae"


def is_qwen_image_vae(shapes: Shapes) -> bool:
    """A Wan 2.1-layout VAE file in the original naming with 16 latent channels (Wan 2.2's
    48-channel layout is another VAE)."""
    return (
        wan_vae.is_wan_vae(shapes)
        and not wan22_vae.is_wan22_layout(shapes)
        and wan_vae.latent_channels(shapes) == LATENT_CHANNELS
    )


def is_qwen_image_vae_config(config: Mapping[str, Any] | None) -> bool:
    """A diffusers folder's `config.json` of this VAE."""
    return config is not None and config.get("_class_name") == CLASS_NAME


def input_channels(shapes: Shapes) -> int:
    """Image channels the encoder takes: 3 (RGB), 4 for Qwen-Image-Layered's RGBA VAE."""
    return shape_of(shapes, "encoder.conv1.weight")[1]


def infer_config(shapes: Shapes) -> dict[str, Any]:
    """`AutoencoderKLQwenImage` kwargs from an original-naming file."""
    if not is_qwen_image_vae(shapes):
        raise ConfigInferenceError("not the Wan 2.1 layout with 16 latent channels")
    config = wan_vae.infer_config(shapes)
    channels = input_channels(shapes)
    if shape_of(shapes, "decoder.head.2.weight")[0] != channels:
        raise ConfigInferenceError("the decoder's output channels differ from the encoder's input")
    return {**config, "input_channels": channels}


def from_original(sd: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Original (Wan repository / ComfyUI) keys -> `AutoencoderKLQwenImage`'s; diffusers keys
    stay."""
    return wan_vae.from_original(sd, config)


def to_original(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`AutoencoderKLQwenImage` keys -> ComfyUI's file naming (the kits' single files)."""
    return wan_vae.to_original(sd)


FORMAT = ModelFormat(
    what="vae",
    title="Qwen-Image VAE (the Wan 2.1 layout)",
    library="diffusers",
    class_name=CLASS_NAME,
    recognize=is_qwen_image_vae,
    infer_config=infer_config,
    convert=from_original,
)
