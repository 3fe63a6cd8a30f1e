"""SD 1.5's torch side: SDXL's builder with one CLIP, SD's VAE scale and SD 1.x's previews.

CLIP-L is read as ComfyUI's SD 1.x CLIP and diffusers' `StableDiffusionPipeline` read it: padded
with its end token, a chosen layer's states through the final layer norm, no pooled embedding.
The UNet takes no size conditioning (`SDXLStepPipeline` reads that from its config).
"""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.contract.builder import Parts
from inline_core.diffusion.encoders.clip_prompt import ClipPromptEncoder, ClipTower
from inline_core.diffusion.formats import clip
from inline_core.diffusion.parts import PartLoader
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.build import SDXLBuilder
from inline_core.families.sdxl.files import DEFAULT_SCHEDULER_CONFIG
from inline_core.families.sdxl.sd15 import PREVIEW
from inline_core.families.sdxl.sd15_files import VAE_FORMAT

SD15_CLIP_SKIP = -1  # SD 1.x reads CLIP's last layer (CLIPSetLastLayer -1)


class SD15Builder(SDXLBuilder):
    preview_format = PREVIEW
    roles: Mapping[str, str] = {
        "transformer": "denoiser",
        "text_encoder": "text_encoder",
        "vae": "vae",
    }

    parts = PartLoader(
        "SD 1.5",
        {"transformer": unet.FORMAT, "text_encoder": clip.CLIP_L, "vae": VAE_FORMAT},
        DEFAULT_SCHEDULER_CONFIG,
    )

    def text_encoder(self, parts: Parts) -> ClipPromptEncoder:
        tower = ClipTower(parts["text_encoder"], pad=None, final_norm=True)
        return ClipPromptEncoder(
            parts["tokenizer"],
            (tower,),
            parts.placements["text_encoder"],
            parts.swap,
            clip_skip=SD15_CLIP_SKIP,
        )


BUILDER = SD15Builder()
