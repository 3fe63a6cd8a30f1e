"""Ordered substring renames between Lightricks' (and ComfyUI's single-file) key naming and
diffusers', both ways (torch-free): the one mechanism the per-component modules share."""

from __future__ import annotations

from collections.abc import Sequence

Renames = Sequence[tuple[str, str]]  # (Lightricks' piece, diffusers' piece), applied in order


def rename(key: str, renames: Renames, *, reverse: bool = False) -> str:
    """`key` with each piece replaced, in the table's order (reversed, each pair swapped, to go
    back)."""
    pairs = [(b, a) for a, b in reversed(renames)] if reverse else list(renames)
    for old, new in pairs:
        key = key.replace(old, new)
    return key
