"""Per-row LoRA deltas on a shared model: many requests' stacks in one batched forward.

The base weights are never changed. Each adapted linear layer carries a forward hook that adds,
for the rows of the batch that asked for an adapter, `strength * scale * (x @ A^T) @ B^T`, one
small gather-matmul-scatter per adapter present in the batch (the multi-LoRA serving idea of
Punica / S-LoRA, without custom kernels). A row may stack several adapters; requests with
different stacks and strengths share the forward. Outside a `rows()` block the hooks add nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import nn

from inline_core.diffusion.adapters.weights import LoraWeights, LowRank, modules_of

# One row's stack: the loaded adapters and their strengths.
RowStack = Sequence[tuple[LoraWeights, float]]


@dataclass(frozen=True)
class _Term:
    pair: LowRank
    rows: torch.Tensor | None  # None: every row of the batch
    strengths: torch.Tensor  # one per selected row, scale folded in


_ON_MODEL: WeakKeyDictionary[nn.Module, RowAdapters] = WeakKeyDictionary()


class RowAdapters:
    """The hooks on one model; one forward at a time (the step loop's thread) uses them. Every
    pipeline over the same loaded model shares one (`RowAdapters.of`), so hooks never pile up."""

    @classmethod
    def of(cls, model: nn.Module) -> RowAdapters:
        found = _ON_MODEL.get(model)
        if found is None:
            found = _ON_MODEL[model] = cls(model)
        return found

    def __init__(self, model: nn.Module) -> None:
        self.modules = modules_of(model)
        self._hooked: set[str] = set()
        self._plan: dict[str, list[_Term]] = {}
        self._rows = 0

    @contextmanager
    def rows(self, stacks: Sequence[RowStack]) -> Generator[None]:
        """Within the block, row `i` of the model's batched inputs gets `stacks[i]`."""
        self._plan = self._make_plan(stacks)
        self._rows = len(stacks)
        try:
            yield
        finally:
            self._plan = {}

    def _make_plan(self, stacks: Sequence[RowStack]) -> dict[str, list[_Term]]:
        # adapter -> row -> summed strength (the same file twice in a stack adds up)
        uses: dict[int, tuple[LoraWeights, dict[int, float]]] = {}
        for row, stack in enumerate(stacks):
            for weights, strength in stack:
                per_row = uses.setdefault(id(weights), (weights, {}))[1]
                per_row[row] = per_row.get(row, 0.0) + strength
        plan: dict[str, list[_Term]] = {}
        for weights, per_row in uses.values():
            everyone = len(per_row) == len(stacks)
            for module_name, pair in weights.layers.items():
                self._hook(module_name)
                device = pair.down_t.device
                rows = None if everyone else torch.tensor(sorted(per_row), device=device)
                strengths = torch.tensor(
                    [per_row[r] * pair.scale for r in sorted(per_row)],
                    device=device,
                    dtype=pair.down_t.dtype,
                )
                plan.setdefault(module_name, []).append(_Term(pair, rows, strengths))
        return plan

    def _hook(self, module_name: str) -> None:
        if module_name in self._hooked:
            return
        module = self.modules[module_name]

        def add_deltas(_module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
            terms = self._plan.get(module_name)
            if not terms:
                return None
            return self._apply(terms, args[0], output)

        module.register_forward_hook(add_deltas)
        self._hooked.add(module_name)

    def _apply(self, terms: list[_Term], x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != self._rows:
            raise RuntimeError(
                f"an adapted layer saw {x.shape[0]} rows in a forward of {self._rows} requests"
            )
        out = out.contiguous()  # a linear layer's fresh output: added to in place
        for term in terms:
            pair = term.pair
            # Strengths scale the rank-r intermediate, the cheapest place; the up projection
            # adds into the output in place (addmm / index_add), so no output-sized temporary.
            if term.rows is None:
                flat = x.reshape(-1, x.shape[-1]).to(pair.down_t.dtype)
                hidden = (flat @ pair.down_t).view(x.shape[0], -1, pair.rank)
                hidden = (hidden * term.strengths.view(-1, 1, 1)).reshape(flat.shape[0], -1)
                out.view(-1, out.shape[-1]).addmm_(hidden.to(out.dtype), pair.up_t.to(out.dtype))
            else:
                picked = x.index_select(0, term.rows).to(pair.down_t.dtype)
                hidden = picked @ pair.down_t
                hidden = hidden * term.strengths.view((-1,) + (1,) * (hidden.dim() - 1))
                out.index_add_(0, term.rows, (hidden @ pair.up_t).to(out.dtype))
        return out
