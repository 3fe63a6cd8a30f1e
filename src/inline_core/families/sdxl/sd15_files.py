"""Which files make an SD 1.5 stack (torch-free; runs at submit): SDXL's code, one CLIP.

- the diffusion model: an all-in-one checkpoint in `checkpoints/` (`model.diffusion_model.`, an
  SD 1.x UNet told by its keys: no size embedding, convolution projections), a split UNet file
  in `diffusion_models/`, or a diffusers `StableDiffusionPipeline` folder;
- the VAE: the checkpoint's (`first_stage_model.`), the folder's, or a 4-channel LDM VAE in
  `vae/`, at SD's latent scale (0.18215);
- the text encoder: CLIP-L, the checkpoint's (`cond_stage_model.`, or ComfyUI's own saves'
  `text_encoders.clip_l.`) or the folder's; the CLIP tokenizer as SDXL finds it.

`INLINE_SD15_MODEL`, `INLINE_SD15_VAE`, `INLINE_SD15_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re

from inline_core.contract.files import ModelRule, PartRule, StackRules
from inline_core.families.sdxl import unet
from inline_core.families.sdxl.files import (
    RULES as SDXL_RULES,
)
from inline_core.families.sdxl.files import (
    encoder_score,
    four_channel_vae,
    vae_format,
)

FAMILY, TITLE = "sd15", "Stable Diffusion 1.5"  # the title ComfyUI's families go by
SD15_VAE_SCALING = 0.18215  # SD 1.x's latent scale (not stored in a VAE file)
SD15_NAME = re.compile(
    r"(^|[/_-])(sd[-_]?1[-_.]?5|v1[-_]5|sd15)|dreamshaper|realistic[-_]?vision", re.IGNORECASE
)
CLIP_L_VIEWS = ("cond_stage_model", "clip_l")  # the original naming's, ComfyUI's own saves'
VAE_FORMAT = vae_format("SD 1.5 VAE", SD15_VAE_SCALING)

RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="SD 1.5 diffusion model",
        override="INLINE_SD15_MODEL",
        pipeline_prefix="StableDiffusionPipeline",
        transformer_class="UNet2DConditionModel",
        recognize=unet.is_sd1,
        # Told by its keys alone: a name (v1-5-pruned-emaonly) claims no file that is not here.
        name=None,
        hint=(
            "put an SD 1.5 checkpoint (v1-5-pruned-emaonly.safetensors, or any community SD "
            "1.5 checkpoint) in {root}/checkpoints, or set INLINE_SD15_MODEL"
        ),
        subfolder="unet",
        looks=unet.looks_sd1,
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="4-channel SD VAE",
            category="vae",
            subfolder="vae",
            override="INLINE_SD15_VAE",
            score=four_channel_vae(SD15_NAME),
            hint="put an SD 1.5 VAE (vae-ft-mse-840000-ema-pruned.safetensors) in {root}/vae",
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="CLIP-L text encoder",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_SD15_TEXT_ENCODER",
            score=encoder_score(False, re.compile(r"clip[-_]?l", re.IGNORECASE)),
            hint="put CLIP-L (clip_l.safetensors) in {root}/text_encoders",
            checkpoint_views=CLIP_L_VIEWS,
        ),
    ),
    tokenizer=SDXL_RULES.tokenizer,  # CLIP's, as SDXL finds it
)
