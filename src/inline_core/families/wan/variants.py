"""Wan's model variants, told from the transformer's config: what each renders and its defaults
(torch-free; runs at submit).

- Wan 2.1 text-to-video (1.3B, 14B): 16 latent channels, the Wan 2.1 VAE (8x down in space),
  832x480, 81 frames at 16 fps, flow shift 3.
- Wan 2.2 TI2V-5B: 48 latent channels, the Wan 2.2 VAE (16x down), 1280x704, 121 frames at 24 fps,
  flow shift 5, and diffusers' `expand_timesteps`: the timestep is given per latent token, so an
  image's latent can stand as the first latent frame at timestep 0 (image-to-video).
- Wan 2.2 A14B text-to-video: two Wan 2.1 14B-shaped experts (`experts.py` finds the pair), the
  high-noise one above the boundary timestep (0.875 of the training timesteps), the low-noise one
  below; the Wan 2.1 VAE, 1280x720, 81 frames at 16 fps, flow shift 12 (Wan's own settings).
- Wan 2.1 image-to-video (14B, 480p and 720p): 36 channels in (the image's latents and a
  first-frame mask beside the noise) and an image embedder fed by a CLIP vision encoder; Wan 2.1's
  480p settings (832x480, 81 frames at 16 fps, flow shift 3); it needs the image.
- Wan 2.2 A14B image-to-video: the pair from an image, by the same 36 channels without an image
  embedder, switched at 0.9, flow shift 5; it needs the image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from inline_core.families.wan.transformer import (
    is_channel_image_to_video,
    is_text_image_to_video,
    is_text_to_video,
    variant,
)

PATCH = 2  # the transformer patchifies latents 1x2x2


@dataclass(frozen=True)
class WanVariant:
    title: str  # how messages name the kind of model
    latent_channels: int  # what its VAE must give
    vae_file: str  # ComfyUI's name for that VAE
    spatial_factor: int  # pixels per latent along each side (its VAE's)
    width: int
    height: int
    frames: int
    fps: int
    shift: float  # the flow shift it samples at when no scheduler config says otherwise
    expand_timesteps: bool  # per-token timesteps (diffusers' Wan 2.2 TI2V flag)
    image_to_video: bool  # takes an image as its first frame
    # Two experts: where they switch, as a share of the training timesteps (None: one model).
    boundary: float | None = None
    needs_image: bool = False  # image-to-video only: a render without an image is refused
    clip_vision: bool = False  # conditioned on a CLIP vision encoder's view of the image too

    @property
    def size_multiple(self) -> int:
        return self.spatial_factor * PATCH

    def defaults(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "frames": self.frames, "fps": self.fps}


T2V = WanVariant(
    title="Wan 2.1 text-to-video",
    latent_channels=16,
    vae_file="wan_2.1_vae.safetensors",
    spatial_factor=8,
    width=832,
    height=480,
    frames=81,
    fps=16,
    shift=3.0,
    expand_timesteps=False,
    image_to_video=False,
)
TI2V = WanVariant(
    title="Wan 2.2 TI2V-5B",
    latent_channels=48,
    vae_file="wan2.2_vae.safetensors",
    spatial_factor=16,
    width=1280,
    height=704,
    frames=121,
    fps=24,
    shift=5.0,
    expand_timesteps=True,
    image_to_video=True,
)
# The others are Wan 2.1's stack (16 channels, its VAE) with what differs.
A14B_T2V = replace(
    T2V,
    title="Wan 2.2 A14B text-to-video",
    width=1280,
    height=720,
    shift=12.0,
    boundary=0.875,
)
I2V = replace(
    T2V, title="Wan 2.1 image-to-video", image_to_video=True, needs_image=True, clip_vision=True
)
A14B_I2V = replace(
    A14B_T2V,
    title="Wan 2.2 A14B image-to-video",
    shift=5.0,
    boundary=0.9,
    image_to_video=True,
    needs_image=True,
)


def variant_of(config: Mapping[str, Any] | None, pair: bool = False) -> WanVariant | None:
    """The variant of a transformer config, `pair` when it is one of two experts (None: not one
    this family renders)."""
    if config is None:
        return None
    if is_text_to_video(config):
        return A14B_T2V if pair else T2V
    if is_text_image_to_video(config):
        return TI2V
    if is_channel_image_to_video(config):
        if config.get("image_dim") is not None:
            return I2V
        return A14B_I2V if pair else None  # an expert alone renders nothing whole
    return None


def model_title(config: Mapping[str, Any], pair: bool = False) -> str:
    """ "Wan 2.2 TI2V-5B", "Wan 2.1 text-to-video 1.3B", ... for messages."""
    kind = variant_of(config, pair)
    size = variant(config)
    title = "Wan" if kind is None else kind.title
    return title if pair or size in ("custom", "TI2V-5B") else f"{title} {size}"
