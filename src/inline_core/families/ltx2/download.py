"""LTX-2's download targets (`downloads/` does the downloading).

    inline-core download --family ltx2 [--models DIR] [--dry-run] [TARGET ...]

Targets: `diffusers` (the default: Lightricks' diffusers repo of LTX-2, landing whole as a
folder in `models/diffusion_models/`: its model index and the folders of its parts), or
ComfyUI's files as its templates load them: `checkpoint` (Lightricks' all-in-one LTX-2 19B dev
file, every part but Gemma, in `checkpoints/`), `text_encoder` (Comfy-Org's Gemma 3 12B file,
its tokenizer inside; `text_encoder_fp8` its fp8 scaled one, `text_encoder_fp4` its NVFP4
`_fp4_mixed` one, the templates' own),
`upscaler` (the x2 latent upsampler, `latent_upscale_models/`), `distilled_lora` (the refining
pass's LoRA, `loras/`), and LTX-2.3's `checkpoint_2_3`, `upscaler_2_3`, `distilled_lora_2_3`.
LTX-2.5 (`ltx25.py`): `diffusers_2_5`, Lightricks' gated diffusers repo of it (the repo and its
`diffusion_decoder/` subfolder as diffusers' docs load them: `LTX2Pipeline.from_pretrained(
"Lightricks/LTX-2.5-Diffusers")`, `LTX2VideoDiffusionDecoderModel.from_pretrained(...,
subfolder="diffusion_decoder")`, huggingface.co/docs/diffusers/main/api/models/
ltx2_diffusion_decoder), and `upscaler_2_5`, the x2 latent upsampler file ComfyUI's LTX-2.5
templates load (Comfy-Org/workflow_templates `templates/video_ltx2_5_t2v.json`, its "Model
Links" note: Lightricks/LTX-2.5 `latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-
1.0.safetensors`). That note's other files (an int8 "convrot" transformer and Gemma 4, the
diffusion and audio VAE files) are not listed: this server does not read ComfyUI's 2.5 layout.
Presets: `comfy` (LTX-2 19B dev's files), `comfy-2.3` (LTX-2.3 22B dev's) and `ltx-2.5`.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target
from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER

REPO = "Lightricks/LTX-2"
REPO_2_3 = "Lightricks/LTX-2.3"
REPO_2_5 = "Lightricks/LTX-2.5"  # Lightricks' own files (ComfyUI's templates link them)
REPO_2_5_DIFFUSERS = "Lightricks/LTX-2.5-Diffusers"
COMFY_REPO = "Comfy-Org/ltx-2"  # ComfyUI's Gemma 3 files
ALL_IN_ONE = ("diffusion_model", "vae", "audio_vae", "vocoder", "connectors")
ENCODER = ("text_encoder", "tokenizer")  # the tokenizer is inside the file
PARTS = ("audio_vae/*", "vocoder/*", "connectors/*")
STACK = (
    "diffusion_model",
    "vae",
    "audio_vae",
    "vocoder",
    "connectors",
    "text_encoder",
    "tokenizer",
)


def file(
    repo: str, category: str, path: str, roles: tuple[str, ...], approx_gb: float | None
) -> Target:
    """One file of a repo, landing by its own name in `models/<category>/`."""
    return Target(repo, category, (path,), roles=roles, approx_gb=approx_gb)


DOWNLOADS = Downloads(
    title="LTX-2",
    targets={
        "diffusers": Target(
            REPO,
            "diffusion_models",
            DIFFUSERS_PIPELINE + PARTS,
            folder="LTX-2",
            roles=STACK,
            layout="diffusers",
        ),
        "checkpoint": file(REPO, "checkpoints", "ltx-2-19b-dev.safetensors", ALL_IN_ONE, 43.3),
        "text_encoder": file(
            COMFY_REPO,
            "text_encoders",
            "split_files/text_encoders/gemma_3_12B_it.safetensors",
            ENCODER,
            24.4,
        ),
        "text_encoder_fp8": file(
            COMFY_REPO,
            "text_encoders",
            "split_files/text_encoders/gemma_3_12B_it_fp8_scaled.safetensors",
            ENCODER,
            13.2,
        ),
        "text_encoder_fp4": file(
            COMFY_REPO,
            "text_encoders",
            "split_files/text_encoders/gemma_3_12B_it_fp4_mixed.safetensors",
            ENCODER,
            None,
        ),
        "upscaler": file(
            REPO, "latent_upscale_models", "ltx-2-spatial-upscaler-x2-1.0.safetensors", (), 1.0
        ),
        "distilled_lora": file(
            REPO, "loras", "ltx-2-19b-distilled-lora-384.safetensors", ("lora",), 7.7
        ),
        "checkpoint_2_3": file(
            REPO_2_3, "checkpoints", "ltx-2.3-22b-dev.safetensors", ALL_IN_ONE, 46.1
        ),
        "upscaler_2_3": file(
            REPO_2_3,
            "latent_upscale_models",
            "ltx-2.3-spatial-upscaler-x2-1.1.safetensors",
            (),
            0.9,
        ),
        "distilled_lora_2_3": file(
            REPO_2_3, "loras", "ltx-2.3-22b-distilled-lora-384.safetensors", ("lora",), None
        ),
        "diffusers_2_5": Target(
            REPO_2_5_DIFFUSERS,
            "diffusion_models",
            (*DIFFUSERS_PIPELINE, *PARTS, f"{DECODER_SUBFOLDER}/*"),
            folder="LTX-2.5-Diffusers",
            roles=STACK,
            layout="diffusers",
        ),
        "upscaler_2_5": file(
            REPO_2_5,
            "latent_upscale_models",
            "latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors",
            (),
            None,
        ),
    },
    presets={
        "ltx-2": ("diffusers",),
        "comfy": ("checkpoint", "text_encoder", "upscaler", "distilled_lora"),
        "comfy-2.3": ("checkpoint_2_3", "text_encoder", "upscaler_2_3", "distilled_lora_2_3"),
        "ltx-2.5": ("diffusers_2_5", "upscaler_2_5"),
    },
    default="ltx-2",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family ltx2`

if __name__ == "__main__":
    sys.exit(main())
