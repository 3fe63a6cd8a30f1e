"""Qwen-Image's download targets (`downloads/` does the downloading).

    inline-core download --family qwen-image [--models DIR] [--dry-run] [TARGET ...]

ComfyUI's repackaged split files (Comfy-Org's Qwen-Image and Qwen-Image-Edit repos) land by
their own names in `models/<category>/`; each preset is a diffusion model, the Qwen-Image VAE, the
Qwen2.5-VL text encoder (bf16 or Comfy-Org's fp8_scaled file) and its tokenizer and image
processor. A single-file Qwen2.5-VL carries neither, so they are the `tokenizer/` and `processor/`
folders of Qwen's Qwen-Image-Edit-2509 diffusers repo, landing in
`text_encoders/qwen_2.5_vl_tokenizer/`, where the family's tokenizer rule finds them. Qwen's
diffusers repos land whole as folders in `models/diffusion_models/`. The Lightning LoRAs
(lightx2v) land in `models/loras/`. The default is Qwen-Image 2512 with the fp8 text encoder.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target
from inline_core.families.qwen_image.files import TOKENIZER_DIR

COMFY = "Comfy-Org/Qwen-Image_ComfyUI"
COMFY_EDIT = "Comfy-Org/Qwen-Image-Edit_ComfyUI"
LIGHTNING = "lightx2v/Qwen-Image-Lightning"
PROCESSOR_REPO = "Qwen/Qwen-Image-Edit-2509"
STACK = ("diffusion_model", "vae", "text_encoder", "tokenizer")
SHARED = ("vae", "text_encoder-fp8", "tokenizer")


def _split(
    repo: str, category: str, name: str, role: str, approx_gb: float | None = None
) -> Target:
    """One of ComfyUI's repackaged files: `split_files/<category>/<name>.safetensors`."""
    path = f"split_files/{category}/{name}.safetensors"
    return Target(repo, category, (path,), roles=(role,), approx_gb=approx_gb)


def _model(repo: str, name: str, approx_gb: float) -> Target:
    return _split(repo, "diffusion_models", name, "diffusion_model", approx_gb)


def _lora(name: str, approx_gb: float) -> Target:
    return Target(
        LIGHTNING, "loras", (f"{name}.safetensors",), roles=("lora",), approx_gb=approx_gb
    )


def _diffusers(repo: str, extra: tuple[str, ...] = ()) -> Target:
    return Target(
        repo,
        "diffusion_models",
        DIFFUSERS_PIPELINE + extra,
        folder=repo.split("/", 1)[1],
        roles=STACK,
        layout="diffusers",
    )


DOWNLOADS = Downloads(
    title="Qwen-Image",
    targets={
        "model": _model(COMFY, "qwen_image_bf16", 40.9),
        "model-fp8": _model(COMFY, "qwen_image_fp8_e4m3fn", 20.4),
        "model-2512": _model(COMFY, "qwen_image_2512_bf16", 40.9),
        "model-2512-fp8": _model(COMFY, "qwen_image_2512_fp8_e4m3fn", 20.4),
        "model-edit-2509": _model(COMFY_EDIT, "qwen_image_edit_2509_bf16", 40.9),
        "model-edit-2509-fp8": _model(COMFY_EDIT, "qwen_image_edit_2509_fp8_e4m3fn", 20.4),
        "model-edit-2511": _model(COMFY_EDIT, "qwen_image_edit_2511_bf16", 40.9),
        "vae": _split(COMFY, "vae", "qwen_image_vae", "vae", 0.25),
        "text_encoder": _split(COMFY, "text_encoders", "qwen_2.5_vl_7b", "text_encoder", 16.6),
        "text_encoder-fp8": _split(
            COMFY, "text_encoders", "qwen_2.5_vl_7b_fp8_scaled", "text_encoder", 9.4
        ),
        "tokenizer": Target(
            PROCESSOR_REPO,
            "text_encoders",
            ("tokenizer/*", "processor/*"),
            folder=TOKENIZER_DIR,
            roles=("tokenizer",),
            approx_gb=0.03,
        ),
        "lora-lightning-8steps": _lora("Qwen-Image-Lightning-8steps-V1.0", 1.7),
        "lora-lightning-4steps": _lora("Qwen-Image-Lightning-4steps-V1.0", 1.7),
        "diffusers": _diffusers("Qwen/Qwen-Image"),
        "diffusers-2512": _diffusers("Qwen/Qwen-Image-2512"),
        "diffusers-edit-2509": _diffusers("Qwen/Qwen-Image-Edit-2509", ("processor/*",)),
        "diffusers-edit-2511": _diffusers("Qwen/Qwen-Image-Edit-2511", ("processor/*",)),
    },
    presets={
        "qwen-image": ("model-fp8", *SHARED),
        "qwen-image-2512": ("model-2512-fp8", *SHARED),
        "edit-2509": ("model-edit-2509-fp8", *SHARED),
        "edit-2511": ("model-edit-2511", *SHARED),
        "lightning-8steps": ("model-fp8", *SHARED, "lora-lightning-8steps"),
    },
    default="qwen-image-2512",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family qwen-image`

if __name__ == "__main__":
    sys.exit(main())
