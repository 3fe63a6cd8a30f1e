"""How a family's transformer blocks are laid out for step caching (torch-free data).

A family names its block list and, for the positional arguments its forward passes each block,
which carry a row per batch item (and which of those a sequence as well, second): that is all
the cache needs to call the blocks on a subset of the rows. A block that carries more than one
stream of hidden states (LTX-2's video and audio) names the others in `streams`: it returns them
after its hidden states, as a tuple, and the cache keeps and reuses their residuals beside the
hidden states' (only the hidden states' residual is compared). A row-carrying argument may be a
tuple of tensors (rotary cos and sin), each with the row dimension first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class BlockLayout:
    blocks: str  # the transformer's attribute holding its blocks (an `nn.ModuleList`)
    hidden: int  # the position of the hidden states, (rows, tokens, dim), that a block returns
    rows: Mapping[int, bool]  # positions with a row dimension first -> whether tokens follow
    mask: int | None = None  # the position of the padding mask (rows, tokens) of real tokens
    # Positions of the further hidden streams a block takes and returns after `hidden` (empty: a
    # block returns its hidden states alone).
    streams: tuple[int, ...] = ()
