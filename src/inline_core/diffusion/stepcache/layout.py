"""How a family's transformer blocks are laid out for step caching (torch-free data).

A family names its block list and, for the positional arguments its forward passes each block,
which carry a row per batch item (and which of those a sequence as well, second): that is all
the cache needs to call the blocks on a subset of the rows. A forward that calls its blocks by
keyword names their parameters in order (`names`); a dual-stream block, which updates the
prompt's tokens beside the image's and returns both (Qwen-Image's; LTX-2's audio beside its
video), names that second stream (`context`, with its own padding mask, if any) and the order it
returns the two in (`returns`); only the hidden states' residual decides, the second stream's is
kept and reused with it. A forward that calls its blocks by keyword without `names` has them bound
to the block's own parameters. A row-carrying argument may be a tuple of tensors (rotary cos and
sin), each with the row dimension first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class BlockLayout:
    blocks: str  # the transformer's attribute holding its blocks (an `nn.ModuleList`)
    hidden: int  # the position of the hidden states, (rows, tokens, dim), that a block returns
    # Positions with a row dimension first -> whether the hidden states' tokens follow (those
    # are trimmed with them). A tensor with k times the forward's rows stacks k copies of them.
    rows: Mapping[int, bool]
    mask: int | None = None  # the position of the padding mask (rows, tokens) of real tokens
    names: tuple[str, ...] = ()  # the blocks' parameters in order (empty: called positionally)
    context: int | None = None  # a second stream (rows, tokens, dim) the blocks update too
    context_mask: int | None = None  # its padding mask (rows, tokens): its real tokens
    returns: tuple[int, ...] = ()  # the positions of the streams returned, in order (empty: hidden)

    @property
    def streams(self) -> tuple[int, ...]:
        """The positions of the streams a block updates: the hidden states, then the context."""
        return (self.hidden,) if self.context is None else (self.hidden, self.context)
