"""Which files make a Qwen-Image stack, and how each is recognised (torch-free; runs at submit).

- the diffusion model: a Qwen-Image transformer (header shapes), or a diffusers `QwenImage*`
  folder, which brings its own VAE, text encoder, tokenizer, processor and scheduler. Text to
  image and edit models share one architecture: the variant is told from the files (a folder's
  pipeline class; a single file's 2511 marker, or `edit` in its name);
- the VAE: the Qwen-Image VAE (`qwen_image_vae.safetensors`, the Wan 2.1 layout) or an
  `AutoencoderKLQwenImage` folder; a Qwen name ranks first;
- the text encoder: Qwen2.5-VL as wide as the transformer's text input, a single file
  (`qwen_2.5_vl_7b.safetensors`) with its tokenizer and image processor from a
  `text_encoders/*qwen*vl*tokenizer*/` folder, or an HF folder with them.

`INLINE_QWEN_IMAGE_MODEL`, `INLINE_QWEN_IMAGE_VAE` and `INLINE_QWEN_IMAGE_TEXT_ENCODER` override
each part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from inline_core.contract.encoder_width import EncoderWidth
from inline_core.contract.files import (
    ModelRule,
    PartRule,
    StackRules,
    TokenizerRule,
    read_json,
)
from inline_core.diffusion.files.shapes import read_shapes
from inline_core.diffusion.formats import qwen_image_vae
from inline_core.families.qwen_image import text_encoder
from inline_core.families.qwen_image.transformer import (
    CLASS_NAME,
    config_of,
    is_qwen_image_transformer,
    zero_cond,
)
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source

FAMILY, TITLE = "qwen-image", "Qwen-Image"
Variant = Literal["text", "edit"]
EDIT_PIPELINES = ("QwenImageEditPlusPipeline",)
PIPELINES = ("QwenImagePipeline", *EDIT_PIPELINES)
# Qwen-Image's published scheduler (a single file's, which carries none).
SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "invert_sigmas": False,
    "max_image_seq_len": 8192,
    "max_shift": 0.9,
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "shift_terminal": 0.02,
    "stochastic_sampling": False,
    "time_shift_type": "exponential",
    "use_beta_sigmas": False,
    "use_dynamic_shifting": True,
    "use_exponential_sigmas": False,
    "use_karras_sigmas": False,
}
TOKENIZER_DIR = "qwen_2.5_vl_tokenizer"  # where a single-file encoder's tokenizer and processor go
PROCESSOR_FILE = "preprocessor_config.json"
QWEN_NAME = re.compile(r"qwen", re.IGNORECASE)
EDIT_NAME = re.compile(r"edit", re.IGNORECASE)
TOKENIZER_FOLDER = re.compile(r"qwen.*vl.*(tokenizer|processor)", re.IGNORECASE)


def variant_of(transformer: Source) -> Variant:
    """Text to image or edit, from the model's files."""
    if not transformer.is_file:
        index = read_json(transformer.path / "model_index.json")
        name = None if index is None else index.get("_class_name")
        return "edit" if name in EDIT_PIPELINES else "text"
    shapes = read_shapes(transformer.path, transformer.view)
    if shapes is not None and zero_cond(shapes):
        return "edit"
    return "edit" if EDIT_NAME.search(transformer.path.name) else "text"


def vae_score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
    """The Qwen-Image VAE (a Wan 2.1-layout file: a Qwen name ranks first)."""
    named = 1 if QWEN_NAME.search(entry.name) else 0
    if entry.is_folder:
        config = read_json(entry.path / "config.json")
        return named if qwen_image_vae.is_qwen_image_vae_config(config) else None
    shapes = read_shapes(entry.path)
    if shapes is None or not qwen_image_vae.is_qwen_image_vae(shapes):
        return None
    return named


def _folder_width(config: Mapping[str, Any]) -> object:
    text: object = config.get("text_config")
    inner = cast(dict[str, Any], text) if isinstance(text, dict) else config
    return inner.get("hidden_size")


ENCODER = EncoderWidth(
    model_type=text_encoder.MODEL_TYPE,
    folder_width=_folder_width,
    recognize=text_encoder.is_qwen25_vl,
    file_width=text_encoder.hidden_size,
    transformer_config=config_of,
    width_key="joint_attention_dim",
    names=(QWEN_NAME,),
)


# A Qwen2.5-VL as wide as the transformer's text input; a Qwen name ranks first.
encoder_score = ENCODER.score


def processor_folder(tokenizer: Source | None) -> Path | None:
    """The image processor beside a tokenizer: in its folder, a `processor/` in it, or a diffusers
    pipeline's `processor/` next to its `tokenizer/`."""
    if tokenizer is None:
        return None
    for folder in (
        tokenizer.location,
        tokenizer.location / "processor",
        tokenizer.path / "processor",
    ):
        if (folder / PROCESSOR_FILE).is_file():
            return folder
    return None


RULES = StackRules(
    title=TITLE,
    family=FAMILY,
    model=ModelRule(
        title="Qwen-Image diffusion model (Qwen-Image, 2512, or Qwen-Image-Edit 2509/2511)",
        override="INLINE_QWEN_IMAGE_MODEL",
        pipeline_prefix=PIPELINES,
        transformer_class=CLASS_NAME,
        recognize=is_qwen_image_transformer,
        name=re.compile(r"qwen[-_ ]?image", re.IGNORECASE),
        hint=(
            "put a Qwen-Image model (qwen_image_bf16.safetensors, qwen_image_2512_bf16"
            ".safetensors, qwen_image_edit_2509_bf16.safetensors, or a diffusers Qwen-Image "
            "folder) in {root}/diffusion_models, or set INLINE_QWEN_IMAGE_MODEL"
        ),
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="Qwen-Image VAE",
            category="vae",
            subfolder="vae",
            override="INLINE_QWEN_IMAGE_VAE",
            score=vae_score,
            hint="put qwen_image_vae.safetensors in {root}/vae, or set INLINE_QWEN_IMAGE_VAE",
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="Qwen2.5-VL text encoder (the one Qwen-Image is conditioned on)",
            category="text_encoders",
            subfolder="text_encoder",
            override="INLINE_QWEN_IMAGE_TEXT_ENCODER",
            score=encoder_score,
            hint=(
                "put the Qwen2.5-VL 7B text encoder (qwen_2.5_vl_7b.safetensors or its "
                "_fp8_scaled file, or an HF folder with its tokenizer) in {root}/text_encoders, "
                "or set INLINE_QWEN_IMAGE_TEXT_ENCODER"
            ),
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder",
        fallback=lambda: None,
        folder=TOKENIZER_FOLDER,
        hint=(
            "a single-file Qwen2.5-VL text encoder needs its tokenizer and image processor "
            f"files in a folder {{root}}/text_encoders/{TOKENIZER_DIR}/ (`inline-core download "
            "--family qwen-image tokenizer` puts them there); or use an HF text-encoder folder "
            "that includes them"
        ),
    ),
)
