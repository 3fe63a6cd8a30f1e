"""Component formats shared by families: one module per format, torch-free at import.

Each module recognises its format from a safetensors header, infers the model's config from tensor
shapes, and converts key names (the conversion imports torch, inside the function). A family names
the formats its stack is made of; `diffusion/loading.py` builds any of them the same way.
"""

from inline_core.diffusion.formats.format import ModelFormat

__all__ = ["ModelFormat"]
