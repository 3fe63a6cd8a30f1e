"""Krea 2 as an Inline Core family (torch-free at import): the `krea/krea-2` node."""

from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.family import Krea2Family

__all__ = ["NODE_TYPE", "Krea2Family"]
