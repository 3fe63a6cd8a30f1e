"""A transformer that runs a batch's rows in calls of their own (as xDiT's Z-Image class runs one
sequence length per call) narrows the per-row state its owner handed it (`row_scopes`): each
row's LoRA stack and step cache act on that row alone, so it renders what the batched forward
renders and each cache decides the same; without the scopes the adapted layers refuse the call.
A step cache adopted on another module than the one that runs is an error, never a silent
uncached render."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
from torch import nn

from inline_core.diffusion.adapters.rows import RowAdapters
from inline_core.diffusion.adapters.weights import LoraWeights, LowRank
from inline_core.diffusion.libs import manual_seed
from inline_core.diffusion.row_scopes import RowScoped, ScopesRows, narrowed
from inline_core.diffusion.stepcache.backend import StepCacheBackend, cached_forward
from inline_core.diffusion.stepcache.layout import BlockLayout
from inline_core.diffusion.stepcache.rows import RowCache
from inline_core.runtime.step_cache import StepCacheSettings

WIDTH, RANK, ROWS, TOKENS, STEPS = 8, 2, 3, 4, 6
LAYOUT = BlockLayout(blocks="blocks", hidden=0, rows={0: True})
SETTINGS = StepCacheSettings(threshold=0.5, warmup=1, front_blocks=1, max_consecutive=2)


class Blocks(nn.Module):
    """Blocks over a batch; with `apart`, one call per row, narrowing the scopes it was handed."""

    def __init__(self, apart: bool) -> None:
        super().__init__()
        manual_seed(0)  # the same weights in every model
        self.blocks = nn.ModuleList([nn.Linear(WIDTH, WIDTH) for _ in range(4)])
        self.apart = apart
        self.row_scopes: tuple[RowScoped, ...] = ()

    def scope_rows(self, scopes: Sequence[RowScoped], /) -> None:
        self.row_scopes = tuple(scopes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.apart:
            return self._blocks(x)
        outs: list[torch.Tensor] = []
        for i in range(x.shape[0]):
            with narrowed(self.row_scopes, [i]):
                outs.append(self._blocks(x[i : i + 1]))
        return torch.cat(outs)

    def _blocks(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + torch.tanh(block(x))
        return x


def lora(seed: int, layer: str) -> LoraWeights:
    g = torch.Generator().manual_seed(seed)
    pair = LowRank(torch.randn(WIDTH, RANK, generator=g), torch.randn(RANK, WIDTH, generator=g))
    return LoraWeights(f"l{seed}", {layer: pair})


def render(
    apart: bool, scoped: bool = True, cached: bool = True
) -> tuple[list[torch.Tensor], list[dict[str, int]]]:
    """STEPS forwards of ROWS rows, each with its own stack and cache (the last row: none)."""
    model = Blocks(apart).eval()
    adapters = RowAdapters.of(model)
    backend = StepCacheBackend.of(model, LAYOUT)
    backend.add_row_scope(adapters)
    assert isinstance(model, ScopesRows)
    if scoped:
        model.scope_rows([adapters, backend])
    stacks = [[(lora(1, "blocks.1"), 1.0)], [(lora(2, "blocks.2"), 0.5)], []]
    caches: list[RowCache | None] = [RowCache(SETTINGS), RowCache(SETTINGS), None]
    if not cached:
        caches = [None] * ROWS
    g = torch.Generator().manual_seed(3)
    x = torch.randn(ROWS, TOKENS, WIDTH, generator=g)
    drift = torch.randn(ROWS, TOKENS, WIDTH, generator=g)
    outs: list[torch.Tensor] = []
    with torch.inference_mode():
        for step in range(STEPS):
            with adapters.rows(stacks), cached_forward(backend, model, caches):
                outs.append(model(x + 0.01 * step * drift))
    counts = [
        {"reused": c.reused, "computed": c.computed, "skipped": c.skipped_blocks}
        for c in caches
        if c is not None
    ]
    return outs, counts


def test_rows_run_in_calls_of_their_own_keep_their_stacks_and_caches() -> None:
    batched, batched_counts = render(apart=False)
    apart, apart_counts = render(apart=True)
    assert all(c["reused"] > 0 for c in batched_counts)  # the caches did reuse
    assert apart_counts == batched_counts
    for a, b in zip(apart, batched, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_without_the_scopes_a_call_over_some_rows_is_refused() -> None:
    with pytest.raises(RuntimeError, match="a cached block saw 1 rows in a forward of 3"):
        render(apart=True, scoped=False)
    with pytest.raises(RuntimeError, match="an adapted layer saw 1 rows in a forward of 3"):
        render(apart=True, scoped=False, cached=False)


def test_a_cache_adopted_on_another_module_than_the_one_that_runs_is_an_error() -> None:
    adopted, running = Blocks(apart=False), Blocks(apart=False)
    backend = StepCacheBackend.of(adopted, LAYOUT)
    with pytest.raises(RuntimeError, match="adopted on another transformer"):
        with cached_forward(backend, running, [RowCache(SETTINGS)]):
            pass
    with cached_forward(backend, running, [None]):  # no cached row: nothing to cache
        pass
