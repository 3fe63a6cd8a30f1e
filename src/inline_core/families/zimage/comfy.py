"""Z-Image's ComfyUI recipe (data, torch-free): its workflows map onto the low-level vocabulary,
and its control patches (`comfy_controls.py`) onto `load/controlnet`."""

from __future__ import annotations

from inline_core.contract.comfy_recipe import ComfyRecipe

RECIPE = ComfyRecipe(handlers="inline_core.families.zimage.comfy_controls:HANDLERS")
