"""SDXL's download targets (`downloads/` does the downloading).

    inline-core download --family sdxl [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: Stability's all-in-one base checkpoint into `checkpoints/`, and
the CLIP tokenizer a checkpoint lacks, from the same repo's `tokenizer/`), `diffusers` (the
diffusers folder, the full-precision files of each part), `vae` (Stability's SDXL VAE as a split
file). Files already present are skipped unless `--force`.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import Downloads, Target

REPO = "stabilityai/stable-diffusion-xl-base-1.0"
TOKENIZER_FILES = tuple(
    f"tokenizer/{name}"
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json")
)
_PARTS = {
    "unet": "diffusion_pytorch_model.safetensors",
    "vae": "diffusion_pytorch_model.safetensors",
    "text_encoder": "model.safetensors",
    "text_encoder_2": "model.safetensors",
}
DIFFUSERS_FILES = (
    "model_index.json",
    "scheduler/scheduler_config.json",
    *(f"{part}/{name}" for part, weights in _PARTS.items() for name in ("config.json", weights)),
    *TOKENIZER_FILES,
    *(name.replace("tokenizer/", "tokenizer_2/") for name in TOKENIZER_FILES),
)
STACK = ("diffusion_model", "vae", "text_encoder", "text_encoder_2")

DOWNLOADS = Downloads(
    title="SDXL 1.0 base",
    targets={
        "checkpoint": Target(
            REPO,
            "checkpoints",
            ("sd_xl_base_1.0.safetensors",),
            roles=STACK,
            approx_gb=6.9,
        ),
        "tokenizer": Target(
            REPO,
            "text_encoders",
            TOKENIZER_FILES,
            folder="clip_tokenizer",  # found as `text_encoders/clip_tokenizer/tokenizer/`
            roles=("tokenizer",),
            approx_gb=0.01,
        ),
        "vae": Target(
            "stabilityai/sdxl-vae",
            "vae",
            ("sdxl_vae.safetensors",),
            roles=("vae",),
            approx_gb=0.3,
        ),
        "diffusers": Target(
            REPO,
            "checkpoints",
            DIFFUSERS_FILES,
            folder="stable-diffusion-xl-base-1.0",
            roles=(*STACK, "tokenizer"),
            layout="diffusers",
            approx_gb=13.9,
        ),
    },
    presets={"comfy": ("checkpoint", "tokenizer")},
    default="comfy",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family sdxl`

if __name__ == "__main__":
    sys.exit(main())
