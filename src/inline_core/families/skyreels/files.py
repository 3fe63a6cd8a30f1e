"""Which files make a SkyReels-V2 stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a diffusers `SkyReelsV2DiffusionForcingPipeline` folder (which brings its
  own VAE, text encoder, tokenizer and scheduler), or a single SkyReels-V2 DF file (named
  `*skyreels*`, or with the fps embedding in its header);
- the VAE: Wan 2.1's (SkyReels-V2 takes its latents), a file or an `AutoencoderKLWan` folder;
- the text encoder: Wan's UMT5, with its tokenizer, as the Wan family finds them.

`INLINE_SKYREELS_MODEL`, `INLINE_SKYREELS_VAE` and `INLINE_SKYREELS_TEXT_ENCODER` override each.
"""

from __future__ import annotations

import re
from typing import Any

from inline_core.contract.files import ModelRule, PartRule, StackRules, TokenizerRule
from inline_core.diffusion.files.shapes import Shapes
from inline_core.families.skyreels.transformer import CLASS_NAME, is_skyreels_transformer
from inline_core.families.wan import files as wan_files
from inline_core.families.wan.files import TOKENIZER_FOLDER, encoder_score, vae_score
from inline_core.models.source import Source

FAMILY, TITLE = "skyreels", "SkyReels-V2"
PIPELINE = "SkyReelsV2DiffusionForcingPipeline"
# SkyReels-V2 DF's published scheduler: Wan's (UniPC over flow sigmas), shifted by 8.
DEFAULT_SHIFT = 8.0
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    **wan_files.DEFAULT_SCHEDULER_CONFIG,
    "flow_shift": DEFAULT_SHIFT,
}


def is_skyreels_model(shapes: Shapes) -> bool:
    return is_skyreels_transformer(shapes)


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="SkyReels-V2 diffusion-forcing model",
        override="INLINE_SKYREELS_MODEL",
        pipeline_prefix=(PIPELINE,),
        transformer_class=CLASS_NAME,
        recognize=is_skyreels_model,
        name=re.compile(r"skyreels", re.IGNORECASE),
        hint=(
            "put a SkyReels-V2 diffusion-forcing model (the diffusers folder "
            "SkyReels-V2-DF-1.3B-540P-Diffusers) in {root}/diffusion_models, or set "
            "INLINE_SKYREELS_MODEL"
        ),
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="Wan 2.1 VAE (SkyReels-V2 takes its latents)",
            category="vae",
            subfolder="vae",
            override="INLINE_SKYREELS_VAE",
            score=vae_score,
            hint="put the Wan 2.1 VAE (wan_2.1_vae.safetensors) in {root}/vae, or set "
            "INLINE_SKYREELS_VAE",
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="UMT5 text encoder (Wan's, which SkyReels-V2 is conditioned on)",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_SKYREELS_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the UMT5-XXL text encoder (umt5_xxl_fp16.safetensors, or an HF folder with "
                "its tokenizer) in {root}/text_encoders, or set INLINE_SKYREELS_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=lambda: None,
        folder=TOKENIZER_FOLDER,
        hint=(
            "a single-file UMT5 text encoder needs the UMT5-XXL tokenizer files in a folder "
            "{root}/text_encoders/umt5-xxl-tokenizer/ (`inline-core download --family wan "
            "tokenizer` puts them there); or use an HF text-encoder folder with its tokenizer"
        ),
    ),
)


def flow_shift(scheduler: Source | None) -> float:
    """The shift of the scheduler config beside a diffusers model, or the published one."""
    return wan_files.flow_shift(scheduler, DEFAULT_SHIFT)
