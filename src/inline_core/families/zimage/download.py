"""Z-Image Turbo's download targets (`downloads/` does the downloading).

    inline-core download [--family z-image] [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: the three ComfyUI single files), `diffusers` (the diffusers folder:
its model index and the folders of its parts, not the repo's images), or one of
`diffusion_model`, `vae`, `text_encoder`. Files land in `models/<category>/`. Files already
present are skipped unless `--force`.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target

COMFY_REPO = "Comfy-Org/z_image_turbo"
DIFFUSERS_REPO = "Tongyi-MAI/Z-Image-Turbo"

DOWNLOADS = Downloads(
    title="Z-Image Turbo",
    targets={
        "diffusion_model": Target(
            COMFY_REPO,
            "diffusion_models",
            ("split_files/diffusion_models/z_image_turbo_bf16.safetensors",),
            roles=("diffusion_model",),
            approx_gb=12.3,
        ),
        "vae": Target(
            COMFY_REPO,
            "vae",
            ("split_files/vae/ae.safetensors",),
            roles=("vae",),
            approx_gb=0.3,
        ),
        "text_encoder": Target(
            COMFY_REPO,
            "text_encoders",
            ("split_files/text_encoders/qwen_3_4b.safetensors",),
            roles=("text_encoder",),
            approx_gb=8.0,
        ),
        "diffusers": Target(
            DIFFUSERS_REPO,
            "diffusion_models",
            DIFFUSERS_PIPELINE,
            folder="Z-Image-Turbo",
            roles=("diffusion_model", "vae", "text_encoder", "tokenizer"),
            layout="diffusers",
            approx_gb=20.6,
        ),
    },
    presets={"comfy": ("diffusion_model", "vae", "text_encoder")},
    default="comfy",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download` (the manager over its table)

if __name__ == "__main__":
    sys.exit(main())
