"""Wan's download targets (`downloads/` does the downloading).

    inline-core download --family wan [--models DIR] [--dry-run] [TARGET ...]

ComfyUI's repackaged split files (Comfy-Org's Wan 2.1 and Wan 2.2 repos) land by their own names
in `models/<category>/`; each variant's preset is its diffusion model (or an A14B pair), the VAE
its latents take, the fp16 UMT5 and the UMT5 tokenizer. A single-file UMT5 carries no tokenizer,
so the tokenizer is the `tokenizer/` folder of Wan-AI's diffusers repo (the one every Wan
diffusers folder ships), landing as `text_encoders/umt5-xxl-tokenizer/tokenizer/`, where the
family's tokenizer rule finds it. Wan-AI's `-Diffusers` repos land whole as folders in
`models/diffusion_models/` (their model index and the folders of their parts, not the repo's
example images). The default is the smallest: Wan 2.1 text-to-video 1.3B.
"""

from __future__ import annotations

import sys

from inline_core.downloads.cli import download_command
from inline_core.downloads.targets import DIFFUSERS_PIPELINE, Downloads, Target

COMFY_21 = "Comfy-Org/Wan_2.1_ComfyUI_repackaged"
COMFY_22 = "Comfy-Org/Wan_2.2_ComfyUI_Repackaged"
TOKENIZER_REPO = "Wan-AI/Wan2.1-T2V-14B-Diffusers"
TOKENIZER_FOLDER = "umt5-xxl-tokenizer"  # matches the family's tokenizer rule (files.py)
STACK = ("diffusion_model", "vae", "text_encoder", "tokenizer")
# The files every preset but the 5B's shares: Wan 2.1's VAE, the UMT5 and its tokenizer.
SHARED = ("vae", "text_encoder", "tokenizer")
EXPERT_2 = ("transformer_2/*",)  # an A14B pair's low-noise expert, in its diffusers folder


def _split(
    repo: str, category: str, name: str, role: str, approx_gb: float | None = None
) -> Target:
    """One of ComfyUI's repackaged files: `split_files/<category>/<name>.safetensors`."""
    path = f"split_files/{category}/{name}.safetensors"
    return Target(repo, category, (path,), roles=(role,), approx_gb=approx_gb)


def _model(repo: str, name: str, approx_gb: float | None = None) -> Target:
    return _split(repo, "diffusion_models", name, "diffusion_model", approx_gb)


def diffusers_folder(repo: str, extra: tuple[str, ...] = (), roles: tuple[str, ...] = ()) -> Target:
    """A `-Diffusers` repo of a Wan-architecture pipeline, landing whole as its own folder."""
    return Target(
        repo,
        "diffusion_models",
        DIFFUSERS_PIPELINE + extra,
        folder=repo.split("/", 1)[1],
        roles=STACK + roles,
        layout="diffusers",
    )


DOWNLOADS = Downloads(
    title="Wan",
    targets={
        "model-t2v-1.3b": _model(COMFY_21, "wan2.1_t2v_1.3B_fp16", 2.8),
        "model-t2v-14b": _model(COMFY_21, "wan2.1_t2v_14B_fp16"),
        "model-i2v-14b-480p": _model(COMFY_21, "wan2.1_i2v_480p_14B_fp16"),
        "model-ti2v-5b": _model(COMFY_22, "wan2.2_ti2v_5B_fp16", 10.0),
        "model-t2v-a14b-high": _model(COMFY_22, "wan2.2_t2v_high_noise_14B_fp16"),
        "model-t2v-a14b-low": _model(COMFY_22, "wan2.2_t2v_low_noise_14B_fp16"),
        "model-i2v-a14b-high": _model(COMFY_22, "wan2.2_i2v_high_noise_14B_fp16"),
        "model-i2v-a14b-low": _model(COMFY_22, "wan2.2_i2v_low_noise_14B_fp16"),
        "vae": _split(COMFY_21, "vae", "wan_2.1_vae", "vae", 0.25),
        "vae-2.2": _split(COMFY_22, "vae", "wan2.2_vae", "vae", 1.4),
        "text_encoder": _split(COMFY_21, "text_encoders", "umt5_xxl_fp16", "text_encoder", 11.4),
        "tokenizer": Target(
            TOKENIZER_REPO,
            "text_encoders",
            ("tokenizer/*",),
            folder=TOKENIZER_FOLDER,
            roles=("tokenizer",),
            approx_gb=0.02,
        ),
        "clip_vision": _split(COMFY_21, "clip_vision", "clip_vision_h", "image_encoder"),
        "diffusers-t2v-1.3b": diffusers_folder("Wan-AI/Wan2.1-T2V-1.3B-Diffusers"),
        "diffusers-t2v-14b": diffusers_folder("Wan-AI/Wan2.1-T2V-14B-Diffusers"),
        "diffusers-i2v-14b-480p": diffusers_folder(
            "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
            ("image_encoder/*", "image_processor/*"),
            ("image_encoder",),
        ),
        "diffusers-ti2v-5b": diffusers_folder("Wan-AI/Wan2.2-TI2V-5B-Diffusers"),
        "diffusers-t2v-a14b": diffusers_folder(
            "Wan-AI/Wan2.2-T2V-A14B-Diffusers", ("transformer_2/*",)
        ),
        "diffusers-i2v-a14b": diffusers_folder(
            "Wan-AI/Wan2.2-I2V-A14B-Diffusers", ("transformer_2/*",)
        ),
    },
    presets={
        "t2v-1.3b": ("model-t2v-1.3b", *SHARED),
        "t2v-14b": ("model-t2v-14b", *SHARED),
        "i2v-14b-480p": ("model-i2v-14b-480p", *SHARED, "clip_vision"),
        "ti2v-5b": ("model-ti2v-5b", "vae-2.2", "text_encoder", "tokenizer"),
        "t2v-a14b": ("model-t2v-a14b-high", "model-t2v-a14b-low", *SHARED),
        "i2v-a14b": ("model-i2v-a14b-high", "model-i2v-a14b-low", *SHARED),
    },
    default="t2v-1.3b",
)
expand = DOWNLOADS.expand
plan = DOWNLOADS.plan
main = download_command(DOWNLOADS)  # `inline-core download --family wan`

if __name__ == "__main__":
    sys.exit(main())
