"""FLUX.2's download targets (`downloads/` does the downloading).

    inline-core download --family flux-2 [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: klein 4B distilled as single files: BFL's model file, ComfyUI's
FLUX.2 VAE and the Qwen3-4B text encoder Z-Image reads too), `base` (klein base 4B's model file),
`diffusers` (klein 4B's diffusers folder), `diffusers_9b` (klein 9B's), `dev` (FLUX.2 dev as
ComfyUI's templates load it: `flux2_dev_fp8mixed.safetensors`, the Mistral Small 3 text encoder
in bf16 and the FLUX.2 VAE; `dev_text_encoder_fp8` is the Mistral in fp8, `dev_turbo_lora` the
Turbo LoRA the templates switch on for 8 steps), `diffusers_dev`
(BFL's gated FLUX.2 dev folder), or one of `diffusion_model`, `vae`, `text_encoder`,
`dev_diffusion_model`, `dev_text_encoder`. Files land in `models/<category>/`.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target

KLEIN_4B = "black-forest-labs/FLUX.2-klein-4B"
KLEIN_BASE_4B = "black-forest-labs/FLUX.2-klein-base-4B"
KLEIN_9B = "black-forest-labs/FLUX.2-klein-9B"
VAE_REPO = DEV_REPO = "Comfy-Org/flux2-dev"  # ComfyUI's FLUX.2 dev files and the VAE
DEV = "black-forest-labs/FLUX.2-dev"
QWEN3_4B_REPO = "Comfy-Org/z_image_turbo"  # the same qwen_3_4b.safetensors Z-Image reads

DOWNLOADS = Downloads(
    title="FLUX.2",
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
        "dev_diffusion_model": Target(
            DEV_REPO,
            "diffusion_models",
            ("split_files/diffusion_models/flux2_dev_fp8mixed.safetensors",),
            roles=("diffusion_model",),
            approx_gb=33.0,
        ),
        "dev_text_encoder": Target(
            DEV_REPO,
            "text_encoders",
            ("split_files/text_encoders/mistral_3_small_flux2_bf16.safetensors",),
            roles=("text_encoder",),
            approx_gb=33.1,
        ),
        "dev_text_encoder_fp8": Target(
            DEV_REPO,
            "text_encoders",
            ("split_files/text_encoders/mistral_3_small_flux2_fp8.safetensors",),
            roles=("text_encoder",),
            approx_gb=16.8,
        ),
        "dev_turbo_lora": Target(
            DEV_REPO,
            "loras",
            ("split_files/loras/Flux2TurboComfyv2.safetensors",),
            roles=("lora",),
            approx_gb=2.6,
        ),
        "diffusers_dev": Target(
            DEV,
            "diffusion_models",
            DIFFUSERS_PIPELINE,
            folder="FLUX.2-dev",
            roles=("diffusion_model", "vae", "text_encoder", "tokenizer"),
            layout="diffusers",
            approx_gb=112.0,
        ),
    },
    presets={
        "comfy": ("diffusion_model", "vae", "text_encoder"),
        "dev": ("dev_diffusion_model", "vae", "dev_text_encoder"),
    },
    default="comfy",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family flux-2`

if __name__ == "__main__":
    sys.exit(main())
