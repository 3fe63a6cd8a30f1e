"""Chroma's ComfyUI recipe (data, torch-free): its workflows map onto the low-level vocabulary,
and ComfyUI's `T5TokenizerOptions` (which Chroma's template puts between the CLIPLoader and its
prompts) through this family's own handler (`comfy_tokenizer.py`). The importer does not know
the class, so the recipe gives its widget order and output type too."""

from __future__ import annotations

from inline_core.contract.comfy_recipe import ComfyClass, ComfyRecipe

TOKENIZER_OPTIONS = "T5TokenizerOptions"

RECIPE = ComfyRecipe(
    handlers="tiny_chroma.comfy_tokenizer:HANDLERS",
    classes={TOKENIZER_OPTIONS: ComfyClass(("min_padding", "min_length"), ("CLIP",))},
)
