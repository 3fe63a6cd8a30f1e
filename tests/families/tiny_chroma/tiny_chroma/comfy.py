"""Chroma's ComfyUI recipe (data, torch-free): its workflows map onto the low-level vocabulary,
and ComfyUI's `T5TokenizerOptions` (which Chroma's template puts between the CLIPLoader and its
prompts) through this family's own handler (`comfy_tokenizer.py`). The importer does not know
the class, so the recipe gives its widget order, output type and inputs as ComfyUI declares them
(`comfy_extras/nodes_cond.py`), which ComfyUI's API serves."""

from __future__ import annotations

from inline_core.contract.comfy_recipe import ComfyClass, ComfyRecipe
from inline_core.contract.comfy_specs import INT, LINK

TOKENIZER_OPTIONS = "T5TokenizerOptions"

RECIPE = ComfyRecipe(
    handlers="tiny_chroma.comfy_tokenizer:HANDLERS",
    classes={
        TOKENIZER_OPTIONS: ComfyClass(
            ("min_padding", "min_length"),
            ("CLIP",),
            required={
                "clip": LINK("CLIP"),
                "min_padding": INT(0, 0, 10000),
                "min_length": INT(0, 0, 10000),
            },
            category="model/conditioning",
            python_module="comfy_extras.nodes_cond",
            display_name="T5 Tokenizer Options",
        )
    },
)
