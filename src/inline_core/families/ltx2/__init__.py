"""LTX-2: video with its soundtrack, a family on the shared model layer (torch-free at import)."""

from inline_core.families.ltx2.family import LTX2Family

__all__ = ["LTX2Family"]
