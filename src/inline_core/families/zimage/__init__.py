"""Z-Image Turbo, the built-in family (torch-free at import; registered through the
`inline_core.families` entry point like any other family)."""

from inline_core.families.zimage.descriptor import NODE_TYPE, ZIMAGE_DESCRIPTOR
from inline_core.families.zimage.family import ZImageFamily

__all__ = ["NODE_TYPE", "ZIMAGE_DESCRIPTOR", "ZImageFamily"]
