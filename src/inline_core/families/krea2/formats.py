"""Krea 2's own component formats (torch-free at import): its transformer and its Qwen3-VL text
encoder, read from diffusers folders (a `Krea2Pipeline` folder, or their own folders).

A single file of either is recognised (the transformer by its `txtfusion` projector, as diffusers
recognises Krea's files) but not read yet: it is refused at submit naming what to use instead,
never loaded as something else. The VAE is the Qwen-Image VAE (`diffusion/formats/
qwen_image_vae.py`), ComfyUI's single file or a folder.
"""

from __future__ import annotations

from typing import Any

from inline_core.diffusion.files.shapes import ConfigInferenceError, Shapes, strip_prefix
from inline_core.diffusion.formats.format import ModelFormat

PREFIXES = ("model.diffusion_model.", "diffusion_model.")
TRANSFORMER_CLASS = "Krea2Transformer2DModel"
TEXT_ENCODER_TYPE = "qwen3_vl"  # an HF folder's config.json `model_type`


def is_krea2_file(shapes: Shapes) -> bool:
    """A Krea 2 transformer in Krea's own naming (a single file)."""
    _prefix, s = strip_prefix(shapes, PREFIXES)
    return "txtfusion.projector.weight" in s


def _folders_only(_shapes: Shapes) -> bool:
    return False


def _no_single_file(_shapes: Shapes) -> dict[str, Any]:
    raise ConfigInferenceError("Krea 2's single files are not read yet: use its diffusers folder")


TRANSFORMER = ModelFormat(
    what="diffusion model",
    title="Krea 2 diffusion model (a diffusers folder)",
    library="diffusers",
    class_name=TRANSFORMER_CLASS,
    recognize=_folders_only,
    infer_config=_no_single_file,
)
QWEN3_VL = ModelFormat(
    what="text encoder",
    title="Qwen3-VL text encoder (an HF folder)",
    library="transformers",
    class_name="Qwen3VLModel",
    recognize=_folders_only,
    infer_config=_no_single_file,
)
