"""Per-row LoRA deltas on a shared model: many requests' stacks in one batched forward.

The base weights are never changed. Each adapted linear layer carries a forward hook that adds
the batch plan's delta to its output (`plan.py`: one pair of matrices where every row asks for the
same stack, else two batched matmuls over per-row stacked matrices). A row may stack several
adapters; requests with different stacks and strengths share the forward. Outside a `rows()`
block, or for a layer no row adapts, the hooks add nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import nn

from inline_core.diffusion.adapters.plan import (
    BatchPlan,
    LayerPlan,
    RowStack,
    Shared,
    make_plan,
    select_rows,
    signature,
)
from inline_core.diffusion.adapters.split_input import whole_input
from inline_core.diffusion.adapters.weights import modules_of

_ON_MODEL: WeakKeyDictionary[nn.Module, RowAdapters] = WeakKeyDictionary()
_NO_PLAN = BatchPlan(0, {}, ())


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
        # Its submodules, not the model: the registry keeps this while the model lives, so
        # nothing here may keep the model (one the residency evicts is then freed).
        self.modules = modules_of(model)
        self._hooked: set[str] = set()
        self._plan = _NO_PLAN
        # The last batch's plan: the next steps of the same requests reuse it.
        self._last: tuple[object, BatchPlan] | None = None
        # The last sub-batch's plan: (the batch's plan, its rows, theirs).
        self._narrowed: tuple[BatchPlan, tuple[int, ...], BatchPlan] | None = None

    @contextmanager
    def rows(self, stacks: Sequence[RowStack]) -> Generator[None]:
        """Within the block, row `i` of the model's batched inputs gets `stacks[i]`."""
        self._plan = self._plan_for(stacks) if any(stacks) else _NO_PLAN
        try:
            yield
        finally:
            self._plan = _NO_PLAN

    @contextmanager
    def subset(self, rows: Sequence[int]) -> Generator[None]:
        """Within the block, the forward's batch is rows `rows` of the current one."""
        plan = self._plan
        picked = tuple(rows)
        last = self._narrowed
        if last is None or last[0] is not plan or last[1] != picked:  # once for all its blocks
            last = self._narrowed = (plan, picked, select_rows(plan, picked))
        self._plan = last[2]
        try:
            yield
        finally:
            self._plan = plan

    def _plan_for(self, stacks: Sequence[RowStack]) -> BatchPlan:
        key = signature(stacks)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        plan = make_plan(stacks)
        for module_name in plan.layers:
            self._hook(module_name)
        self._last = (key, plan)
        return plan

    def _hook(self, module_name: str) -> None:
        if module_name in self._hooked:
            return
        module = self.modules[module_name]

        def add_deltas(_module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
            layer = self._plan.layers.get(module_name)
            if layer is None:
                return None
            return self._apply(layer, args[0], output)

        module.register_forward_hook(add_deltas)
        self._hooked.add(module_name)

    def _apply(self, layer: LayerPlan, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        rows = self._plan.rows
        if x.shape[0] != rows:
            raise RuntimeError(f"an adapted layer saw {x.shape[0]} rows in a forward of {rows}")
        if out.dim() == x.dim() >= 3 and out.shape[-2] != x.shape[-2]:
            x = whole_input(x, int(out.shape[-2]))  # a split gathered its output (split_input)
        out = out.contiguous()  # a linear layer's fresh output: added to in place
        down, up = layer.down_t, layer.up_t.to(out.dtype)
        if isinstance(layer, Shared):
            flat = x.reshape(-1, x.shape[-1]).to(down.dtype)
            out.view(-1, out.shape[-1]).addmm_((flat @ down).to(out.dtype), up)
        else:
            batched = x.reshape(rows, -1, x.shape[-1]).to(down.dtype)
            hidden = torch.bmm(batched, down).to(out.dtype)
            out.view(rows, -1, out.shape[-1]).baddbmm_(hidden, up)
        return out
