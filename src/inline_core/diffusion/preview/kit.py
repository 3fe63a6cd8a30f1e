"""A tiny random-weight decoder for a latent format's `taesd` previews, in ComfyUI's naming (for
the kits).

Written as `vae_approx/<name>.safetensors` under the format's first tiny decoder name (FLUX's
`taef1_decoder`, Wan's `lighttaew2_1` / `lighttaew2_2`), the file ComfyUI and the renderer look
for, so the `taesd` previews load and run a real decoder in the tests. An image format's is
TAESD's layout (the real ones: 64 channels, 3 blocks a stage; this one 4 stages, 8x up, at test
size); a video format's is TAEHV's (`taehv.py`: the real Wan ones 256 to 64 channels; this one
the same depth and strides, 4x in time, at test width).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from inline_core.diffusion.formats.taehv import PREFIX, STAGES, TinyVideoDecoderConfig
from inline_core.diffusion.formats.taesd import TinyDecoderConfig, to_comfy_key
from inline_core.diffusion.kit import save_weights, seeded
from inline_core.diffusion.libs import module
from inline_core.diffusion.preview.formats import PreviewFormat


def tiny_decoder_config(fmt: PreviewFormat) -> TinyDecoderConfig:
    return TinyDecoderConfig(
        latent_channels=fmt.channels,
        out_channels=3,
        num_blocks=(1, 1, 1, 1),
        block_out_channels=(16, 16, 16, 16),
    )


def tiny_video_decoder_config(fmt: PreviewFormat) -> TinyVideoDecoderConfig:
    return TinyVideoDecoderConfig(
        latent_channels=fmt.channels,
        widths=(16, 16, 8, 8),
        time_strides=(1, 2, 2),  # Wan's: four frames per latent frame
        patch_size=fmt.spatial_factor // 2**STAGES,
    )


def write_tiny_decoder(models: Path, fmt: PreviewFormat, seed: int = 7) -> Path:
    if not fmt.tiny_decoders:
        raise ValueError(f"{fmt.name} latents have no tiny decoder name")
    seeded(seed)
    path = models / "vae_approx" / f"{fmt.tiny_decoders[0]}.safetensors"
    if fmt.video:
        from inline_core.diffusion.preview.taehv import build_decoder

        video = build_decoder(tiny_video_decoder_config(fmt))
        state = cast(dict[str, torch.Tensor], video.state_dict())
        return save_weights({PREFIX + k: v for k, v in state.items()}, path, torch.float32)
    decoder = module("diffusers.models.autoencoders.vae").DecoderTiny(
        **tiny_decoder_config(fmt).to_diffusers()
    )
    state = cast(dict[str, torch.Tensor], decoder.state_dict())
    comfy = {to_comfy_key(k): v for k, v in state.items()}
    return save_weights(comfy, path, torch.float32)
