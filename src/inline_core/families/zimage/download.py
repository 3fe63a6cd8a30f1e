"""Z-Image Turbo's download targets (`models/download.py` does the downloading).

    inline-core download [--family z-image] [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: the three ComfyUI single files), `diffusers` (the full diffusers
folder), or one of `diffusion_model`, `vae`, `text_encoder`. Files land in `models/<category>/`.
Files already present are skipped unless `--force`.
"""

from __future__ import annotations

import sys

from inline_core.models.download import Downloads, Target

COMFY_REPO = "Comfy-Org/z_image_turbo"
DIFFUSERS_REPO = "Tongyi-MAI/Z-Image-Turbo"

DOWNLOADS = Downloads(
    title="Z-Image Turbo",
    targets={
        "diffusion_model": Target(
            COMFY_REPO,
            "diffusion_models",
            "split_files/diffusion_models/z_image_turbo_bf16.safetensors",
            size="about 12.3 GB",
        ),
        "vae": Target(COMFY_REPO, "vae", "split_files/vae/ae.safetensors", size="about 335 MB"),
        "text_encoder": Target(
            COMFY_REPO,
            "text_encoders",
            "split_files/text_encoders/qwen_3_4b.safetensors",
            size="about 8 GB",
        ),
        "diffusers": Target(DIFFUSERS_REPO, "diffusion_models", None, folder="Z-Image-Turbo"),
    },
    presets={"comfy": ("diffusion_model", "vae", "text_encoder")},
    default="comfy",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = DOWNLOADS.main

if __name__ == "__main__":
    sys.exit(main())
