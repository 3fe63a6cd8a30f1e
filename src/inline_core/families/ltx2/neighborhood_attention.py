"""LTX-2.5's diffusion decoder's neighbourhood attention, computed block by block (torch).

diffusers' `LTX2VideoVaeNeighborhoodAttnProcessor` (the decoder's default) hands flex attention
a `BlockMask` for a 3D window (`kernel_size` cells, centred and shifted inward at the grid's
borders, as NATTEN's `na3d`). Uncompiled, as this server runs it, flex attention is torch's
eager `math_attention`: the whole `tokens x tokens` score matrix in float32, and building the
mask evaluates its `mask_mod` on that whole matrix in int64 as well, so memory grows with the
square of the video's cells (the tiny kit's 64x64, 9-frame decode: 36864 cells, over 10 GB).

This processor computes the same attention over blocks of query cells, each against the box of
key cells its windows can reach, with the same window as a boolean mask: scores in float32 as
`math_attention` computes them, masked to -inf, softmaxed in float32, cast to the query's dtype
and applied to the values. A key outside every window of a block is one `math_attention` gives
a zero weight, so the result is the same to the float rounding of shorter sums; memory is one
block's scores (`SCORES_PER_BLOCK`, the batch's rows and heads counted), whatever the video's
size. It is installed through
diffusers' attention-processor seam (`set_attn_processor`); the decoder then builds no
`BlockMask` (it builds one only for its flex processor).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import torch

SCORES_PER_BLOCK = 1 << 24  # float32 scores per block (64 MiB), batch and heads included

Box = tuple[int, int, int]


def window_starts(length: int, kernel: int) -> torch.Tensor:
    """Each cell's window start along an axis: centred, shifted inward at the borders."""
    cells = torch.arange(length)
    return (cells - kernel // 2).clamp(0, length - kernel)


def block_shape(grid: Box, kernel: Box, heads: int, budget: int = SCORES_PER_BLOCK) -> Box:
    """Query cells per block along (t, h, w): the kernel's box, narrowed (t, then h, then w)
    while one block's scores pass `budget`, then widened (w, then h, then t) while they fit.
    `heads`: the score rows per query and key, every batch row's heads."""

    def scores(block: list[int]) -> int:
        reach = [min(b + k - 1, n) for b, k, n in zip(block, kernel, grid, strict=True)]
        return heads * math.prod(block) * math.prod(reach)

    block = [min(k, n) for k, n in zip(kernel, grid, strict=True)]
    for axis in (0, 1, 2):
        while block[axis] > 1 and scores(block) > budget:
            block[axis] = (block[axis] + 1) // 2
    for axis in (2, 1, 0):
        while block[axis] < grid[axis]:
            wider = list(block)
            wider[axis] = min(grid[axis], block[axis] * 2)
            if scores(wider) > budget:
                break
            block = wider
    return (block[0], block[1], block[2])


def neighborhood_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kernel_size: Box,
    budget: int = SCORES_PER_BLOCK,
) -> torch.Tensor:
    """Attention of each cell over its window. `query` (already scaled), `key` and `value`:
    `(B, T, H, W, heads, head_dim)`; the result has their shape, in the query's dtype."""
    batch, *sizes, heads, head_dim = query.shape
    grid: Box = (sizes[0], sizes[1], sizes[2])
    kernel: Box = (
        min(kernel_size[0], grid[0]),
        min(kernel_size[1], grid[1]),
        min(kernel_size[2], grid[2]),
    )
    starts = [window_starts(n, k) for n, k in zip(grid, kernel, strict=True)]
    block = block_shape(grid, kernel, batch * heads, budget)  # each batch row scores its own
    result = torch.empty_like(query)
    for origin in itertools.product(*(range(0, n, b) for n, b in zip(grid, block, strict=True))):
        cells = [range(a, min(a + b, n)) for a, b, n in zip(origin, block, grid, strict=True)]
        reach, mask = _windows(cells, starts, kernel)
        found = _attend(_tokens(query, cells), _tokens(key, reach), _tokens(value, reach), mask)
        shape = (batch, heads, *(len(r) for r in cells), head_dim)
        _box(result, cells).copy_(found.reshape(shape).permute(0, 2, 3, 4, 1, 5))
    return result


def _windows(
    cells: list[range], starts: list[torch.Tensor], kernel: Box
) -> tuple[list[range], torch.Tensor]:
    """The box of keys a block's windows reach, and `(queries, keys)`: which of them each
    query's window holds."""
    reach: list[range] = []
    masks: list[torch.Tensor] = []
    for axis, rows in enumerate(cells):
        begin = starts[axis][rows.start : rows.stop, None]
        keys = range(int(begin[0]), int(begin[-1]) + kernel[axis])
        at = torch.arange(keys.start, keys.stop)[None, :]
        masks.append((at >= begin) & (at < begin + kernel[axis]))
        reach.append(keys)
    mask = (
        masks[0][:, None, None, :, None, None]
        & masks[1][None, :, None, None, :, None]
        & masks[2][None, None, :, None, None, :]
    )
    return reach, mask.reshape(math.prod(len(r) for r in cells), -1)


def _box(cells: torch.Tensor, box: list[range]) -> torch.Tensor:
    """The box's cells of `(B, T, H, W, heads, head_dim)`, a view."""
    return cells[
        :, box[0].start : box[0].stop, box[1].start : box[1].stop, box[2].start : box[2].stop
    ]


def _tokens(cells: torch.Tensor, box: list[range]) -> torch.Tensor:
    """The box's cells as `(B, heads, tokens, head_dim)`."""
    return _box(cells, box).permute(0, 4, 1, 2, 3, 5).flatten(2, 4)


def _attend(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """`math_attention`'s arithmetic on one block: float32 scores, the window, softmax, then
    the query's dtype (every query's window holds keys, so no row is all -inf)."""
    scores = query.float() @ key.float().transpose(-2, -1)
    scores = scores.masked_fill(~mask.to(scores.device), -math.inf)
    weights = scores.softmax(dim=-1).to(query.dtype)
    return weights @ value.to(query.dtype)


class BlockedNeighborhoodAttnProcessor:
    """An attention processor for diffusers' `LTX2VideoVaeNeighborhoodAttention`: its
    projections and output layer, the attention by `neighborhood_attention`."""

    def __init__(self, budget: int = SCORES_PER_BLOCK) -> None:
        self.budget = budget

    def __call__(
        self, attn: Any, hidden_states: torch.Tensor, block_mask: object = None
    ) -> torch.Tensor:
        # `block_mask`: the decoder passes None for any processor but its flex one.
        batch, frames, height, width, _ = hidden_states.shape
        query, key, value = cast(tuple[torch.Tensor, ...], attn.project_qkv(hidden_states))
        kernel = cast(tuple[int, int, int], tuple(attn.kernel_size))
        found = neighborhood_attention(query, key, value, kernel, self.budget)
        flat = found.reshape(batch, frames, height, width, -1)
        return cast(torch.Tensor, attn.to_out[0](flat))


def use_blocked_attention(decoder: Any) -> None:
    """Install the blocked processor on every attention layer of `decoder`
    (`LTX2VideoDiffusionDecoderModel`), through diffusers' `set_attn_processor`."""
    decoder.set_attn_processor(BlockedNeighborhoodAttnProcessor())
