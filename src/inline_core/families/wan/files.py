"""Which files make a Wan stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a Wan 2.1 text-to-video transformer (header shapes: 1.3B or 14B) or a Wan
  2.2 TI2V-5B (48 channels in), or a diffusers Wan folder, which brings its own VAE, text
  encoder, tokenizer and scheduler;
- the VAE: the one whose latents the model takes, the Wan 2.1 VAE (`wan_2.1_vae.safetensors`) or
  the Wan 2.2 VAE (`wan2.2_vae.safetensors`), original naming, or an `AutoencoderKLWan` folder;
- the text encoder: a UMT5 as wide as the transformer's text input, a single file (its tokenizer
  from a `text_encoders/*umt5*tokenizer*/` folder, or that folder's `tokenizer/`, as the download
  target lands Wan-AI's) or an HF folder with its tokenizer.

`INLINE_WAN_MODEL`, `INLINE_WAN_VAE` and `INLINE_WAN_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from inline_core.contract.encoder_width import EncoderWidth
from inline_core.contract.files import (
    ModelRule,
    PartRule,
    StackRules,
    TokenizerRule,
    read_json,
)
from inline_core.diffusion.files.shapes import Shapes, read_shapes, strip_prefix
from inline_core.diffusion.formats import umt5, wan_vae
from inline_core.families.wan.transformer import (
    CLASS_NAME,
    PREFIXES,
    config_of,
    is_wan_transformer,
)
from inline_core.families.wan.variants import T2V, variant_of
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "wan", "Wan"
# Wan 2.1's published scheduler (used when the model is a single file without a scheduler config):
# UniPC over flow sigmas, shifted by 3 (the 480p setting).
DEFAULT_SHIFT = 3.0
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "UniPCMultistepScheduler",
    "num_train_timesteps": 1000,
    "prediction_type": "flow_prediction",
    "use_flow_sigmas": True,
    "flow_shift": DEFAULT_SHIFT,
    "solver_order": 2,
}
WAN_NAME = re.compile(r"wan", re.IGNORECASE)
UMT5_NAME = re.compile(r"umt5", re.IGNORECASE)
TOKENIZER_FOLDER = re.compile(r"umt5.*tokenizer|tokenizer.*umt5", re.IGNORECASE)


def is_wan_model(shapes: Shapes) -> bool:
    """A Wan transformer file this family renders: Wan 2.1 text-to-video (16 channels in), Wan
    2.2 TI2V-5B (48), Wan 2.1 image-to-video (36, with an image embedder) or an A14B expert (16,
    or 36 for image-to-video, without one)."""
    if not is_wan_transformer(shapes):
        return False
    _prefix, s = strip_prefix(shapes, PREFIXES)
    patch = s.get("patch_embedding.weight")
    image = any(k.startswith(("img_emb.", "condition_embedder.image_embedder.")) for k in s)
    config = {"in_channels": patch[1] if patch and len(patch) > 1 else None}
    return variant_of({**config, "image_dim": 1 if image else None}, pair=True) is not None


def vae_channels(path: Path, is_folder: bool) -> int | None:
    """A Wan VAE's latent channels (16: Wan 2.1's, 48: Wan 2.2's); None: not a Wan VAE."""
    if is_folder:
        config = read_json(path / "config.json")
        if config is None or config.get("_class_name") != wan_vae.CLASS_NAME:
            return None
        channels = config.get("z_dim", wan_vae.LATENT_CHANNELS)
        return channels if isinstance(channels, int) else None
    shapes = read_shapes(path)
    if shapes is None or not wan_vae.is_wan_vae(shapes):
        return None
    return wan_vae.latent_channels(shapes)


def source_vae_channels(source: Source) -> int | None:
    return vae_channels(source.location, not source.is_file)


def vae_score(entry: CatalogEntry, transformer: Source | None) -> int | None:
    """The Wan VAE whose latents the transformer takes (Wan 2.1's for a 16-channel model, Wan
    2.2's for the 5B); a Wan name ranks first."""
    config = None if transformer is None else config_of(transformer)
    kind = variant_of(config) or T2V
    if vae_channels(entry.path, entry.is_folder) != kind.latent_channels:
        return None
    return 1 if WAN_NAME.search(entry.name) else 0


ENCODER = EncoderWidth(
    model_type=umt5.MODEL_TYPE,
    folder_width=lambda config: config.get("d_model"),
    recognize=umt5.is_umt5,
    file_width=umt5.hidden_size,
    transformer_config=config_of,
    width_key="text_dim",
    names=(UMT5_NAME,),
)


# A UMT5 as wide as the transformer's text input; a UMT5 name ranks first.
encoder_score = ENCODER.score


def flow_shift(scheduler: Source | None, default: float = DEFAULT_SHIFT) -> float:
    """The shift of the scheduler config beside a diffusers model, or `default`: Wan 2.1's own
    (a single file's variant may have its own: `WanVariant.shift`), or a Wan-based family's."""
    if scheduler is None:
        return default
    config = read_json(scheduler.location / "scheduler_config.json") or {}
    shift = config.get("flow_shift", config.get("shift"))
    return float(shift) if isinstance(shift, int | float) else default


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="Wan diffusion model (Wan 2.1 text-to-video, Wan 2.2 TI2V-5B or an A14B expert)",
        override="INLINE_WAN_MODEL",
        pipeline_prefix=("WanPipeline", "WanImageToVideoPipeline"),
        transformer_class=CLASS_NAME,
        recognize=is_wan_model,
        name=re.compile(r"wan2?\.?1.*[ti]2v|wan2?\.?2.*(ti2v|[ti]2v.*noise)", re.IGNORECASE),
        hint=(
            "put a Wan 2.1 text-to-video model (wan2.1_t2v_1.3B_fp16.safetensors), Wan 2.2 "
            "TI2V-5B (wan2.2_ti2v_5B_fp16.safetensors), the two files of a Wan 2.2 A14B pair "
            "(wan2.2_t2v_high_noise_14B_fp16.safetensors and its low_noise sibling), or a "
            "diffusers Wan folder, in {root}/diffusion_models, or set INLINE_WAN_MODEL"
        ),
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="Wan VAE (Wan 2.1's; Wan 2.2's for the 5B)",
            category="vae",
            subfolder="vae",
            override="INLINE_WAN_VAE",
            score=vae_score,
            hint=(
                "put the Wan VAE the model takes (wan_2.1_vae.safetensors for Wan 2.1, "
                "wan2.2_vae.safetensors for Wan 2.2 TI2V-5B) in {root}/vae, or set INLINE_WAN_VAE"
            ),
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="UMT5 text encoder (the one Wan is conditioned on)",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_WAN_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the UMT5-XXL text encoder (umt5_xxl_fp16.safetensors, or an HF folder with "
                "its tokenizer) in {root}/text_encoders, or set INLINE_WAN_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=lambda: None,
        folder=TOKENIZER_FOLDER,
        hint=(
            "a single-file UMT5 text encoder needs the UMT5-XXL tokenizer files "
            "(tokenizer.json or spiece.model, tokenizer_config.json) in a folder "
            "{root}/text_encoders/umt5-xxl-tokenizer/ (or its tokenizer/ subfolder, where "
            "`inline-core download --family wan tokenizer` puts them); or use an HF "
            "text-encoder folder that includes its tokenizer"
        ),
    ),
)
