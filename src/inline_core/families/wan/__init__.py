"""Wan 2.1 text-to-video, a family on the shared model layer (torch-free at import)."""

from inline_core.families.wan.family import WanFamily

__all__ = ["WanFamily"]
