"""Chroma as an Inline Core family (torch-free at import), from a distribution of its own."""

from tiny_chroma.family import NODE_TYPE, ChromaFamily

__all__ = ["NODE_TYPE", "ChromaFamily"]
