"""ComfyUI workflows naming the kit's files: the importer tests' templates, pointed at the tiny
models and sized for a CPU render, plus ComfyUI's default Stable Diffusion workflow."""

from __future__ import annotations

from typing import Any

from primitive_graphs import ENCODER, MODEL, VAE

from tests.importer import comfy_workflows

Json = dict[str, Any]


KIT_FILES = {"model": MODEL, "encoder": ENCODER, "vae": VAE}


def zimage_api(
    prompt: str, *, seed: int, width: int = 64, height: int = 64, steps: int = 8, cfg: float = 1.0
) -> Json:
    """ComfyUI's Z-Image Turbo template (API format) on the kit's files."""
    return comfy_workflows.zimage_api(
        prompt=prompt, seed=seed, width=width, height=height, steps=steps, cfg=cfg, **KIT_FILES
    )


def zimage_ui(
    prompt: str, *, seed: int, width: int = 64, height: int = 64, steps: int = 8, cfg: float = 1.0
) -> Json:
    """The same template as ComfyUI's frontend saves it (UI format) on the kit's files."""
    return comfy_workflows.zimage_ui(
        prompt=prompt, seed=seed, width=width, height=height, steps=steps, cfg=cfg, **KIT_FILES
    )


SD_CHECKPOINT = "v1-5-pruned-emaonly.safetensors"


def sd_txt2img_api() -> Json:
    """ComfyUI's default Stable Diffusion text-to-image workflow (API format)."""
    return {
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "seed": 8566257,
                "steps": 20,
                "cfg": 8,
                "sampler_name": "euler",
                "scheduler": "normal",
                "denoise": 1,
                "model": ["4", 0],
                "positive": ["6", 0],
                "negative": ["7", 0],
                "latent_image": ["5", 0],
            },
        },
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": SD_CHECKPOINT}},
        "5": {
            "class_type": "EmptyLatentImage",
            "inputs": {"width": 512, "height": 512, "batch_size": 1},
        },
        "6": {
            "class_type": "CLIPTextEncode",
            "inputs": {"text": "a bottle with a galaxy inside", "clip": ["4", 1]},
        },
        "7": {
            "class_type": "CLIPTextEncode",
            "inputs": {"text": "text, watermark", "clip": ["4", 1]},
        },
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {
            "class_type": "SaveImage",
            "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]},
        },
    }
