"""A batch's LoRA plan: for every adapted layer, the matrices one forward applies to its rows.

Two shapes. Where every row asks for the same adapters at the same strengths (a lone render, or
a batch of one stack), one pair of matrices serves the whole batch: `x @ down` then an in-place
`addmm` of `up`. Otherwise each row's adapters are stacked along the rank (zero-padded to the
longest stack, zeros for rows without one) with its strengths folded into the up matrices, and
the layer runs two batched matmuls whatever the number of distinct adapters (BGMV-style, as
Punica / S-LoRA serve many LoRAs in one batch). A plan is built once per batch composition and
reused by the following steps while the same requests share the forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inline_core.diffusion.adapters.weights import LoraWeights, LowRank

# One row's stack: the loaded adapters and their strengths.
RowStack = Sequence[tuple[LoraWeights, float]]


@dataclass(frozen=True)
class Shared:
    """Every row: `x @ down_t @ up_t` (strength folded into `up_t`)."""

    down_t: torch.Tensor  # (in, r)
    up_t: torch.Tensor  # (r, out)


@dataclass(frozen=True)
class PerRow:
    """Row `i`: `x[i] @ down_t[i] @ up_t[i]` (its stack concatenated along the rank)."""

    down_t: torch.Tensor  # (rows, in, R)
    up_t: torch.Tensor  # (rows, R, out)


LayerPlan = Shared | PerRow


@dataclass(frozen=True)
class BatchPlan:
    rows: int
    layers: dict[str, LayerPlan]
    holds: tuple[LoraWeights, ...]  # keeps the weights alive while the plan may be reused


def signature(stacks: Sequence[RowStack]) -> tuple[tuple[tuple[int, float], ...], ...]:
    return tuple(tuple((id(w), s) for w, s in row) for row in stacks)


def make_plan(stacks: Sequence[RowStack]) -> BatchPlan:
    merged = [merged_row(row) for row in stacks]
    holds = tuple({id(w): w for row in merged for w, _s in row}.values())
    modules = sorted({m for w in holds for m in w.layers})
    first = merged[0] if merged else []
    if first and all(row == first for row in merged):
        layers: dict[str, LayerPlan] = {m: _shared(m, first) for m in modules}
    else:
        layers = {m: _per_row(m, merged) for m in modules}
    return BatchPlan(len(stacks), layers, holds)


def merged_row(row: RowStack) -> list[tuple[LoraWeights, float]]:
    """A row's stack with a file named twice at its summed strength, in first-use order."""
    summed: dict[int, tuple[LoraWeights, float]] = {}
    for weights, strength in row:
        before = summed.get(id(weights), (weights, 0.0))[1]
        summed[id(weights)] = (weights, before + strength)
    return [(w, s) for w, s in summed.values() if s != 0.0]


def _pairs(module: str, row: list[tuple[LoraWeights, float]]) -> list[tuple[LowRank, float]]:
    return [(w.layers[module], s) for w, s in row if module in w.layers]


def _shared(module: str, row: list[tuple[LoraWeights, float]]) -> LayerPlan:
    pairs = _pairs(module, row)
    down = torch.cat([p.down_t for p, _s in pairs], dim=1)
    up = torch.cat([p.up_t * s for p, s in pairs], dim=0)
    return Shared(down, up)


def _per_row(module: str, rows: list[list[tuple[LoraWeights, float]]]) -> LayerPlan:
    per_row = [_pairs(module, row) for row in rows]
    sample = next(p for pairs in per_row for p, _s in pairs)
    width = max(sum(p.rank for p, _s in pairs) for pairs in per_row)
    n_in, n_out = int(sample.down_t.shape[0]), int(sample.up_t.shape[1])
    device, dtype = sample.down_t.device, sample.down_t.dtype
    down = torch.zeros(len(rows), n_in, width, device=device, dtype=dtype)
    up = torch.zeros(len(rows), width, n_out, device=device, dtype=dtype)
    for i, pairs in enumerate(per_row):
        at = 0
        for pair, strength in pairs:
            down[i, :, at : at + pair.rank] = pair.down_t
            up[i, at : at + pair.rank] = pair.up_t * strength
            at += pair.rank
    return PerRow(down, up)


def select_rows(plan: BatchPlan, rows: Sequence[int]) -> BatchPlan:
    """The plan for a sub-batch of `plan`'s rows (a step cache running some rows' blocks)."""
    if not plan.layers:
        return plan
    index: torch.Tensor | None = None
    layers: dict[str, LayerPlan] = {}
    for name, layer in plan.layers.items():
        if isinstance(layer, Shared):
            layers[name] = layer
            continue
        if index is None:
            index = torch.tensor(list(rows), device=layer.down_t.device)
        down, up = layer.down_t.index_select(0, index), layer.up_t.index_select(0, index)
        layers[name] = PerRow(down, up)
    return BatchPlan(len(rows), layers, plan.holds)
