"""FLUX.2 klein's download targets (`downloads/` does the downloading).

    inline-core download --family flux-2 [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: klein 4B distilled as single files: BFL's model file, ComfyUI's
FLUX.2 VAE and the Qwen3-4B text encoder Z-Image reads too), `base` (klein base 4B's model file),
`diffusers` (klein 4B's diffusers folder), `diffusers_9b` (klein 9B's), or one of
`diffusion_model`, `vae`, `text_encoder`. Files land in `models/<category>/`.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target

KLEIN_4B = "black-forest-labs/FLUX.2-klein-4B"
KLEIN_BASE_4B = "black-forest-labs/FLUX.2-klein-base-4B"
KLEIN_9B = "black-forest-labs/FLUX.2-klein-9B"
VAE_REPO = "Comfy-Org/flux2-dev"
QWEN3_4B_REPO = "Comfy-Org/z_image_turbo"  # the same qwen_3_4b.safetensors Z-Image reads

DOWNLOADS = Downloads(
    title="FLUX.2 klein",
    targets={
        "diffusion_model": Target(
            KLEIN_4B,
            "diffusion_models",
            ("flux-2-klein-4b.safetensors",),
            roles=("diffusion_model",),
            approx_gb=7.8,
        ),
        "base": Target(
            KLEIN_BASE_4B,
            "diffusion_models",
            ("flux-2-klein-base-4b.safetensors",),
            roles=("diffusion_model",),
            approx_gb=7.8,
        ),
        "vae": Target(
            VAE_REPO,
            "vae",
            ("split_files/vae/flux2-vae.safetensors",),
            roles=("vae",),
            approx_gb=0.3,
        ),
        "text_encoder": Target(
            QWEN3_4B_REPO,
            "text_encoders",
            ("split_files/text_encoders/qwen_3_4b.safetensors",),
            roles=("text_encoder",),
            approx_gb=8.0,
        ),
        "diffusers": Target(
            KLEIN_4B,
            "diffusion_models",
            DIFFUSERS_PIPELINE,
            folder="FLUX.2-klein-4B",
            roles=("diffusion_model", "vae", "text_encoder", "tokenizer"),
            layout="diffusers",
            approx_gb=16.0,
        ),
        "diffusers_9b": Target(
            KLEIN_9B,
            "diffusion_models",
            DIFFUSERS_PIPELINE,
            folder="FLUX.2-klein-9B",
            roles=("diffusion_model", "vae", "text_encoder", "tokenizer"),
            layout="diffusers",
            approx_gb=35.0,
        ),
    },
    presets={"comfy": ("diffusion_model", "vae", "text_encoder")},
    default="comfy",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family flux-2`

if __name__ == "__main__":
    sys.exit(main())
