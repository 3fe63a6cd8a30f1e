"""How a family's transformer blocks are laid out for step caching (torch-free data).

A family names its block list and, for the positional arguments its forward passes each block,
which carry a row per batch item (and which of those a sequence as well, second): that is all
the cache needs to call the blocks on a subset of the rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class BlockLayout:
    blocks: str  # the transformer's attribute holding its blocks (an `nn.ModuleList`)
    hidden: int  # the position of the hidden states, (rows, tokens, dim), that a block returns
    rows: Mapping[int, bool]  # positions with a row dimension first -> whether tokens follow
    mask: int | None = None  # the position of the padding mask (rows, tokens) of real tokens
