"""SDXL as a family plug-in (the `stability/sdxl` node); see `family.py`."""

from inline_core.families.sdxl.family import SDXLFamily

__all__ = ["SDXLFamily"]
