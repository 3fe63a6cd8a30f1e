"""FLUX.2 klein as an Inline Core family (torch-free at import): the `bfl/flux-2` node."""

from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.families.flux2.family import Flux2Family

__all__ = ["NODE_TYPE", "Flux2Family"]
